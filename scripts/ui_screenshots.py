"""Drive headless Chromium through the MLflow UI and keep screenshots: how docs/img's UI pictures are made.

    python scripts/ui_screenshots.py STEPS.json      (chromium: apt-get install chromium)

STEPS.json is a list run in one browser profile, so what the UI keeps between visits (localStorage)
carries from step to step as it would for a person:

    {"goto": URL}                 open an address; waits for the page to settle
    {"click": TEXT}               click the innermost visible element whose text is TEXT
    {"click_css": CSS}            click the first visible element matching CSS
    {"type": TEXT}                type into the focused element, then Enter
    {"focus": CSS}                focus the first element matching CSS
    {"wait": SECONDS}
    {"shot": PATH}                save a PNG of the window
    {"say": JS}                   print what a JavaScript expression gives (e.g. location.href)

Uses Chromium's DevTools protocol over aiohttp's websocket client; nothing else to install.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import aiohttp

PORT = 9333
WIDTH, HEIGHT = 1600, 1000
SETTLE_S = 6.0

# the centre of the innermost visible element whose text is `want`, for a real mouse click
LOCATE = """(() => {
  const want = %s;
  const all = [...document.querySelectorAll('body *')].filter(e => {
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && (e.innerText || '').trim() === want;
  });
  const inner = %s ? [...document.querySelectorAll(want)].filter(e => e.getBoundingClientRect().width > 0)
    : all.filter(e => !all.some(o => o !== e && e.contains(o)));
  if (!inner.length) return null;
  inner[0].scrollIntoView({block: 'center'});
  const r = inner[0].getBoundingClientRect();
  return [r.x + r.width / 2, r.y + r.height / 2];
})()"""


class Page:
    def __init__(self, socket):
        self.socket, self.next_id = socket, 0

    async def call(self, method: str, **params):
        self.next_id += 1
        await self.socket.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            message = json.loads((await self.socket.receive()).data)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    async def evaluate(self, expression: str):
        result = await self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        return result.get("result", {}).get("value")


async def run(steps: list[dict]) -> None:
    profile = tempfile.mkdtemp(prefix="ui-shots-")
    browser = subprocess.Popen(
        [
            shutil.which("chromium") or "chromium",
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            f"--remote-debugging-port={PORT}",
            f"--user-data-dir={profile}",
            f"--window-size={WIDTH},{HEIGHT}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        target = _page_target()
        async with aiohttp.ClientSession() as session, session.ws_connect(target, max_msg_size=0) as socket:
            page = Page(socket)
            await page.call(
                "Emulation.setDeviceMetricsOverride",
                width=WIDTH,
                height=HEIGHT,
                deviceScaleFactor=1,
                mobile=False,
            )
            for step in steps:
                await _step(page, step)
    finally:
        browser.terminate()
        browser.wait()
        shutil.rmtree(profile, ignore_errors=True)


def _page_target() -> str:
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/json/list") as answer:
                pages = [t for t in json.load(answer) if t["type"] == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("chromium did not open its DevTools port")
        time.sleep(0.3)


async def _step(page: Page, step: dict) -> None:
    ((action, value),) = step.items()
    if action == "goto":
        await page.call("Page.navigate", url=value)
        await asyncio.sleep(SETTLE_S)
    elif action in ("click", "click_css"):
        where = await page.evaluate(LOCATE % (json.dumps(value), json.dumps(action == "click_css")))
        if where is None:
            print(f"not found: {value}")
            return
        x, y = where
        await page.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            await page.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)
        print(f"clicked: {value}")
        await asyncio.sleep(3.0)
    elif action == "focus":
        print(
            await page.evaluate(
                f"(() => {{ const e = document.querySelector({json.dumps(value)}); "
                "if (!e) return 'no ' + " + json.dumps(value) + "; e.focus(); return 'focused'; })()"
            )
        )
    elif action == "type":
        await page.call("Input.insertText", text=value)
        for kind in ("keyDown", "keyUp"):
            await page.call(
                "Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter", windowsVirtualKeyCode=13
            )
        await asyncio.sleep(3.0)
    elif action == "wait":
        await asyncio.sleep(float(value))
    elif action == "shot":
        data = (await page.call("Page.captureScreenshot", format="png"))["data"]
        Path(value).write_bytes(base64.b64decode(data))
        print(f"saved {value}")
    elif action == "say":
        print(f"{value} -> {await page.evaluate(value)}")
    else:
        raise ValueError(
            f"unknown step {action!r}: one of goto, click, click_css, focus, type, wait, shot, say"
        )


if __name__ == "__main__":
    asyncio.run(run(json.loads(Path(sys.argv[1]).read_text())))
