"""SAGE's released result files: nine benchmark runs (100 dialogues each) with every turn's appraisal.

``rlver score``, ``rlver calibrate``, ``rlver simulator fit`` and the docs' examples read them. They are
SAGE's data (Tencent/digitalhuman, MIT licence), never shipped with rlver: ``rlver data download
sage-released`` fetches them from the repository at the commit the sha256 below are of, checks each and
writes it atomically under ``sage_released/`` in the data folder, the layout the team's shared data
folder has, so ``DATA/sage_released/*/*.jsonl`` names all nine.
"""

from __future__ import annotations

from rlver.profiles.download import SAGE_ROOT, DataFile

#: The folder under a data folder (and the prefix of each file's stored name).
FOLDER = "sage_released"
#: rlver's folder for each simulator → the repository's folder under ``SAGE/dataset/``.
SIMULATOR_FOLDERS = {
    "deepseek-v3-simulator": "deepseek-v3-2024-1227_based_simulator",
    "gpt-4o-simulator": "gpt-4o-2024-0806_based_simulator",
}

_FILES: tuple[tuple[str, str, str], ...] = (
    (
        "deepseek-v3-simulator",
        "claude3.7-think",
        "4836b7c612c020996c5ceb7f9c6b015749374e1aa2113d489829de7b6caa6664",
    ),
    (
        "deepseek-v3-simulator",
        "deepseek-v3-1227",
        "ad161691899aac24562f323b597d9a59eebbf987381cbc01cddd247231508811",
    ),
    ("deepseek-v3-simulator", "gpt-4.1", "a6a5a053cf04e7982cc9f08687cee10dd3f08eac2505e6bd64d2b2941bcbf56e"),
    (
        "deepseek-v3-simulator",
        "gpt-4o-0808",
        "4164096cb15135a68e58ac78551b68e28c7438fcfbe5952b8796221e7892d245",
    ),
    (
        "deepseek-v3-simulator",
        "openai-o1",
        "59bfbb21ed31f184e8ae14791533338b3a9bc56231d4cffeff75d75082d4c673",
    ),
    (
        "deepseek-v3-simulator",
        "qwen2.5-72b",
        "6d1c84805263067a2d39f8ee3e2767651bfff67a31cb8881c56fdca1234f35d3",
    ),
    (
        "gpt-4o-simulator",
        "claude3.7-think",
        "b62ad128328d2a6d5abd9ad8d236029a554c40268892c2790cf9a6db8e8345d8",
    ),
    ("gpt-4o-simulator", "gpt-4o-0806", "8766d597cf4651f91dba1078822d359eb2570e22c255cb3bc714141dc4128f68"),
    ("gpt-4o-simulator", "openai-o1", "3080b039080d0ee4bf9af6cca75246281e87d844f9a9c0fc612c97f843981408"),
)


def _released(simulator: str, model: str, sha256: str) -> DataFile:
    name = f"{simulator}/{model}_result.jsonl"
    return DataFile(
        name=name,
        filename=f"{FOLDER}/{name}",
        sha256=sha256,
        rows=100,
        paths=(f"SAGE/dataset/{SIMULATOR_FOLDERS[simulator]}/{model}_result.jsonl",),
        description=f"SAGE's released run of {model} with a {simulator.removesuffix('-simulator')} user",
        root=SAGE_ROOT,
    )


#: The released files by their name under ``sage_released/``.
SAGE_RELEASED: dict[str, DataFile] = {f.name: f for f in (_released(*row) for row in _FILES)}

#: The download sets of released results (``rlver data download NAME``).
RELEASED_SETS: dict[str, tuple[DataFile, ...]] = {"sage-released": tuple(SAGE_RELEASED.values())}

__all__ = ["FOLDER", "RELEASED_SETS", "SAGE_RELEASED", "SIMULATOR_FOLDERS"]
