"""Language workloads: causal LMs and BERT from transformers (built from config, random weights)
and the project's own Transformer-XL, on synthetic token streams."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from src.models.base import Workload


def transformer_flops_per_token(matmul_params: int, n_layer: int, seq_len: int, d_model: int) -> float:
    """Training FLOPs per token: 6 per weight (forward + backward) plus attention's two products
    over the context, QK^T and AV, 12 * n_layer * seq_len * d_model (PaLM, Chowdhery et al. 2022,
    appendix B; counted over the full context, as torch's flop counter counts SDPA)."""
    return float(6 * matmul_params + 12 * n_layer * seq_len * d_model)


def matmul_params(model: nn.Module) -> int:
    """Parameters that take part in matrix products: all but embedding tables that are only
    looked up (an input embedding tied to the output layer counts once, as the output layer)."""
    params = {id(p): p.numel() for p in model.parameters()}
    output = model.get_output_embeddings()
    tied = {id(output.weight)} if output is not None else set()
    for module in model.modules():
        if isinstance(module, nn.Embedding) and id(module.weight) not in tied:
            params.pop(id(module.weight), None)
    return sum(params.values())


UNMASKED_SDPA = "sdpa_unmasked"


def unmasked_sdpa() -> str:
    """transformers' own SDPA attention, registered under a name that has no mask builder.

    The synthetic batches have no padding, so the only mask a model needs is causality, which
    SDPA applies itself (`is_causal`, from each attention module) with its flash kernels. Under
    torch.compile, transformers (5.x with torch < 2.14) otherwise materialises a (batch, 1, seq, seq)
    mask, which keeps SDPA off those kernels: GPT-2 compiled spent 51.7 ms of a 175.7 ms step in
    masked attention on an H200, 22.2 ms of 148.7 ms without the mask (benchmarks/profile_step.py).
    Returns the implementation's name.
    """
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    AttentionInterface.register(UNMASKED_SDPA, sdpa_attention_forward)
    return UNMASKED_SDPA


def _causal_lm_loss(model: nn.Module, batch) -> torch.Tensor:
    return model(input_ids=batch, labels=batch).loss


def causal_lm_workload(model: nn.Module, cfg: dict, batch_size: int, device) -> Workload:
    tokens = torch.randint(0, cfg["vocab_size"], (batch_size, cfg["seq_len"]), device=device)
    flops = transformer_flops_per_token(matmul_params(model), cfg["n_layer"], cfg["seq_len"], cfg["d_model"])
    return Workload(
        model=model,
        batch=tokens,
        loss_fn=_causal_lm_loss,
        items_per_step=batch_size * cfg["items_per_sample"],
        optimizer="adamw",
        flops_per_item=cfg.get("flops_per_item") or flops,
    )


def gpt2(cfg: dict, batch_size: int, device) -> Workload:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=cfg["vocab_size"],
        n_positions=cfg["seq_len"],
        n_embd=cfg["d_model"],
        n_layer=cfg["n_layer"],
        n_head=cfg["n_head"],
        n_inner=cfg["d_inner"],
        resid_pdrop=cfg["dropout"],
        embd_pdrop=cfg["dropout"],
        attn_pdrop=cfg["dropatt"],
        attn_implementation=unmasked_sdpa(),
    )
    model = GPT2LMHeadModel(config).to(device)
    return causal_lm_workload(model, cfg, batch_size, device)


def llama(cfg: dict, batch_size: int, device) -> Workload:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=cfg["vocab_size"],
        hidden_size=cfg["d_model"],
        intermediate_size=cfg["d_inner"],
        num_hidden_layers=cfg["n_layer"],
        num_attention_heads=cfg["n_head"],
        num_key_value_heads=cfg["n_kv_head"],
        max_position_embeddings=cfg["seq_len"],
        tie_word_embeddings=False,
        attn_implementation=unmasked_sdpa(),
    )
    with torch.device(device):  # initialise on the device: a billion weights are slow on the host
        model = LlamaForCausalLM(config)
    return causal_lm_workload(model, cfg, batch_size, device)


# --- BERT masked-LM pre-training -----------------------------------------------------------

MASK_FRACTION = 0.15  # BERT masks 15% of the tokens and predicts only those
MASK_TOKEN_ID = 103  # [MASK] in BERT's uncased WordPiece vocabulary


class MaskedLMPretraining(nn.Module):
    """BertForMaskedLM's encoder and MLM head, the head applied at the masked positions only, as
    BERT's reference pre-training does (a fixed count per sequence: no data-dependent shapes)."""

    def __init__(self, mlm: nn.Module):
        super().__init__()
        self.mlm = mlm

    def forward(self, input_ids, positions, labels) -> torch.Tensor:
        hidden = self.mlm.bert(input_ids=input_ids).last_hidden_state
        picked = hidden.gather(1, positions.unsqueeze(-1).expand(-1, -1, hidden.size(-1)))
        logits = self.mlm.cls(picked)
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def _masked_lm_loss(model: nn.Module, batch) -> torch.Tensor:
    return model(*batch)


def bert_large(cfg: dict, batch_size: int, device) -> Workload:
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=cfg["vocab_size"],
        hidden_size=cfg["d_model"],
        num_hidden_layers=cfg["n_layer"],
        num_attention_heads=cfg["n_head"],
        intermediate_size=cfg["d_inner"],
        max_position_embeddings=cfg["seq_len"],
        hidden_dropout_prob=cfg["dropout"],
        attention_probs_dropout_prob=cfg["dropatt"],
        attn_implementation=unmasked_sdpa(),
    )
    with torch.device(device):
        model = MaskedLMPretraining(BertForMaskedLM(config))
    seq_len, vocab = cfg["seq_len"], cfg["vocab_size"]
    n_masked = max(1, round(MASK_FRACTION * seq_len))
    tokens = torch.randint(0, vocab, (batch_size, seq_len), device=device)
    positions = torch.rand(batch_size, seq_len, device=device).argsort(dim=1)[:, :n_masked].sort(dim=1).values
    labels = tokens.gather(1, positions)
    inputs = tokens.scatter(1, positions, MASK_TOKEN_ID % vocab)

    d_model = cfg["d_model"]
    encoder = sum(p.numel() for p in model.mlm.bert.encoder.parameters())
    head = d_model * d_model + vocab * d_model  # the head's transform and its (tied) decoder
    flops_per_sequence = (
        seq_len * transformer_flops_per_token(encoder, cfg["n_layer"], seq_len, d_model) + 6 * n_masked * head
    )
    return Workload(
        model=model,
        batch=(inputs, positions, labels),
        loss_fn=_masked_lm_loss,
        items_per_step=batch_size * cfg["items_per_sample"],
        optimizer="adamw",
        flops_per_item=cfg.get("flops_per_item") or flops_per_sequence / cfg["items_per_sample"],
    )


# --- Transformer-XL ------------------------------------------------------------------------


class RecurrentLoss:
    """The Transformer-XL workload's loss: each step's segment attends over the memory that the
    previous step left (detached), so recurrence costs what it costs in real training."""

    def __init__(self):
        self.mems: list[torch.Tensor] | None = None

    def __call__(self, model: nn.Module, batch) -> torch.Tensor:
        tokens, targets = batch
        loss, self.mems = model(tokens, targets, self.mems)
        return loss


def zipf_tokens(vocab_size: int, shape: tuple[int, ...], device) -> torch.Tensor:
    """Token ids drawn with probability ~ 1/(id + 1): word frequencies follow Zipf's law and
    Transformer-XL's vocabulary is sorted by frequency, so the adaptive softmax sees clusters
    filled as in real text (~80% of tokens in the head at WikiText-103's cutoffs)."""
    weights = 1.0 / torch.arange(1, vocab_size + 1, device=device, dtype=torch.float32)
    n = 1
    for s in shape:
        n *= s
    return torch.multinomial(weights, n, replacement=True).view(shape)


def transformer_xl(cfg: dict, batch_size: int, device) -> Workload:
    from src.models.transformer_xl import TransformerXL, training_flops_per_token

    with torch.device(device):
        model = TransformerXL(
            vocab_size=cfg["vocab_size"],
            cutoffs=list(cfg["cutoffs"]),
            div_val=cfg["div_val"],
            n_layer=cfg["n_layer"],
            d_model=cfg["d_model"],
            n_head=cfg["n_head"],
            d_head=cfg["d_head"],
            d_inner=cfg["d_inner"],
            mem_len=cfg["mem_len"],
            dropout=cfg["dropout"],
            dropatt=cfg["dropatt"],
        )
    stream = zipf_tokens(cfg["vocab_size"], (batch_size, cfg["seq_len"] + 1), device)
    tokens, targets = stream[:, :-1].contiguous(), stream[:, 1:].contiguous()
    flops = training_flops_per_token(model, batch_size, cfg["seq_len"], targets)
    return Workload(
        model=model,
        batch=(tokens, targets),
        loss_fn=RecurrentLoss(),
        items_per_step=batch_size * cfg["items_per_sample"],
        optimizer="adamw",
        flops_per_item=cfg.get("flops_per_item") or flops,
    )
