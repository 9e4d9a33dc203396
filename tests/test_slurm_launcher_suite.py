"""Hydra's own launcher test suites, run through `hydra/launcher=slurm` on the real one-node Slurm.

hydra-submitit-launcher runs the same suites against its local executor; here every sweep of the
suites' test apps becomes real job arrays. The apps know nothing of gpubench, so the keys that
slurm.yaml fills from a gpubench point (nodes, time limit, GPU request) and the site settings of
the test cluster are given on the command line, and the project's conf/ is added to the search
path for `hydra/launcher=slurm` itself.
"""

from __future__ import annotations

import pytest
from conftest import CONF_DIR
from hydra.extra.pytest_plugin import hydra_restore_singletons, hydra_sweep_runner, hydra_task_runner
from hydra.test_utils.launcher_common_tests import IntegrationTestSuite, LauncherTestSuite

pytestmark = pytest.mark.slow
# The suites' fixtures: pyproject keeps Hydra's pytest plugin off for the rest of the tests.
__all__ = ["hydra_restore_singletons", "hydra_sweep_runner", "hydra_task_runner"]

# CPU-only jobs of one task on the test cluster's partition
ON_THE_TEST_CLUSTER = [
    f"hydra.searchpath=[file://{CONF_DIR}]",
    "hydra.launcher.partition=debug",
    "hydra.launcher.nodes=1",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.timeout_min=5",
    "hydra.launcher.gres=null",
    "hydra.launcher.constraint=null",
]


@pytest.fixture(autouse=True)
def apps_own_version_base(monkeypatch):
    """The suites' apps leave version_base unset (Hydra 1.1's defaults: a job changes into its
    output folder). Hydra keeps it process-wide and the launcher hands it to every job, so an
    earlier test's compose at version_base 1.3 would otherwise turn that off for them."""
    from hydra.version import _UNSPECIFIED_, VersionBase

    monkeypatch.setattr(VersionBase.instance(), "version_base", _UNSPECIFIED_)


@pytest.fixture(autouse=True)
def submits_to_the_test_cluster(slurm_cluster, monkeypatch):
    """sbatch, here and in the apps the integration suite starts, finds the cluster by SLURM_CONF."""
    monkeypatch.setenv("SLURM_CONF", slurm_cluster["SLURM_CONF"])


@pytest.mark.parametrize("launcher_name, overrides", [("slurm", ON_THE_TEST_CLUSTER)])
class TestSlurmShapesLauncher(LauncherTestSuite):
    pass


@pytest.mark.parametrize(
    "task_launcher_cfg, extra_flags",
    [
        (
            {},
            [
                "-m",
                "hydra/hydra_logging=disabled",
                "hydra/job_logging=disabled",
                "hydra/launcher=slurm",
                *ON_THE_TEST_CLUSTER,
            ],
        )
    ],
)
class TestSlurmShapesLauncherIntegration(IntegrationTestSuite):
    pass
