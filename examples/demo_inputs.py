"""Real inputs every machine has: a codebase (the standard library's json and email packages) and
legal texts (licences from /usr/share/common-licenses, else LICENSE files of installed packages)."""

from __future__ import annotations

import email
import json
import site
import sys
from pathlib import Path

QUESTIONS = [
    # (question, a fragment the right passage holds, where that passage must come from)
    (
        "how does the JSON decoder report the line and column of an error",
        "lineno",
        "json/decoder.py",
    ),
    (
        "what happens to my patent licence if I sue someone for patent infringement",
        "patent litigation",
        "Apache",
    ),
]


def codebase() -> list[Path]:
    """The folders of the standard library's json and email packages."""
    return [Path(json.__file__).parent, Path(email.__file__).parent]


def legal_texts() -> list[Path]:
    """Apache-2.0 and GPL-3 licence texts: Debian's copies when present, else the LICENSE files
    shipped inside installed packages' dist-info folders (Apache-2.0 ones first)."""
    common = Path("/usr/share/common-licenses")
    found = [common / n for n in ("Apache-2.0", "GPL-3") if (common / n).is_file()]
    if len(found) == 2:
        return found
    roots = [Path(p) for p in [*site.getsitepackages(), site.getusersitepackages()] if Path(p).is_dir()]
    roots.append(Path(sys.prefix))
    apache, gpl = [], []
    for root in roots:
        for lic in sorted(root.glob("*.dist-info/**/LICEN[CS]E*")):
            try:
                head = lic.read_text(encoding="utf-8", errors="replace")[:3000]
            except OSError:
                continue
            if "Apache License" in head and "Version 2.0" in head and "TERMS AND CONDITIONS" in head:
                apache.append(lic)
            elif "GNU GENERAL PUBLIC LICENSE" in head and "Version 3" in head:
                gpl.append(lic)
    return found + apache[:1] + gpl[:1]
