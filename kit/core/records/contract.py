"""The one contract between the executor and a case notebook: parameter names, scrap names and
environment variable names.

Both sides import these names from here, so a renamed parameter or scrap cannot leave one side
behind. It lives in ``kit.core`` (kernel-safe, the lowest layer) because backends, which sit
below the case layer, read one of its environment variables.
"""

from __future__ import annotations

# Papermill parameters the executor injects into a case notebook.
SPEC_PARAM = "spec"                # the resolved case (CaseSpec.to_dict())
RESULT_PATH_PARAM = "result_path"  # where the kernel writes the case result

# Scrapbook scraps a case notebook glues, read back by the summary.
CASE_RESULT_SCRAP = "case_result"
VERDICT_SCRAP = "verdict"
# Glued by the control notebook.
DIAGNOSIS_SCRAP = "diagnosis"

# Environment variables the executor sets for a case kernel.
# The case's path prefix in the run directory: helper processes log to `<prefix>.<what>.log`.
LOG_PREFIX_ENV = "PARITY_KIT_LOG_PREFIX"
# The Ray placement group reserved for the case (Ray executor only).
PLACEMENT_GROUP_ENV = "PARITY_KIT_PLACEMENT_GROUP"
# The main environment's interpreter: a kernel that cannot parse descriptors (Levanter's, on
# pydantic 1) asks it to resolve a case when the notebook is run by hand.
MAIN_PYTHON_ENV = "PARITY_KIT_MAIN_PYTHON"
# The run's model-digest cache (run directory, rundir.MODEL_DIGESTS): the kernel's model check reads
# the file digests the executor's preflight computed instead of hashing the model again.
MODEL_DIGEST_CACHE_ENV = "PARITY_KIT_MODEL_DIGEST_CACHE"
# The result_path the executor started this kernel to write. The parameter stays in the executed notebook; this
# variable does not: the notebook opened in JupyterLab and run again has the one without the other, and writes
# nowhere instead of over the result the gate recorded (kit.case.runner.result_target).
RESULT_PATH_ENV = "PARITY_KIT_RESULT_PATH"
# The GPUs the local executor gave the case, as nvidia-smi indices (with CUDA_DEVICE_ORDER=PCI_BUS_ID,
# so that CUDA counts them as nvidia-smi does); torch, JAX and vLLM then see only those.
CUDA_VISIBLE_DEVICES_ENV = "CUDA_VISIBLE_DEVICES"

# Environment variables the executor itself reads.
# The node's GPUs as `nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total
# --format=csv,noheader` lists them, one GPU a line (or separated by ";"), instead of asking nvidia-smi:
# a stand-in device list, so that GPU scheduling can be tested on a machine without GPUs. Empty: none.
FAKE_GPUS_ENV = "PARITY_KIT_FAKE_GPUS"


def case_parameters(spec: dict, result_path: str) -> dict:
    """The papermill parameters a case notebook receives, under the contract's names: its spec and where to write
    its result."""
    return {SPEC_PARAM: spec, RESULT_PATH_PARAM: result_path}
