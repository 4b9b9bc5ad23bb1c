"""advisor.rules and advisor.workloads where a clone keeps them: beside advisor/, not in it.

setup.cfg installs the clone's top-level rules/ and workloads/ as advisor.rules and advisor.workloads.
`python -m advisor` started in a clone's root imports advisor from the clone's own advisor/ folder
(the working folder comes first on sys.path), which shadows the installed package and has no
rules/ inside it: a plain (non-editable) install then failed with "cannot import name 'rules'".
This finder, last on sys.meta_path, finds the two where the clone keeps them; an installed package
or an editable install's own finder answers first wherever they can.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path

_MAPPED = ("rules", "workloads")


class _CloneFolders(importlib.abc.MetaPathFinder):
    def __init__(self, root: Path):
        self.root = root

    def find_spec(self, name, path, target=None):
        package, _, leaf = name.partition(".")
        if package != "advisor" or leaf not in _MAPPED:
            return None
        folder = self.root / leaf
        return importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])


def install(advisor_folder: Path) -> None:
    """Add the finder when `advisor_folder` is a clone's advisor/ (its root holds setup.cfg and the
    mapped folders, and advisor/ holds none of them)."""
    root = advisor_folder.parent
    if any((advisor_folder / leaf).is_dir() for leaf in _MAPPED) or not (root / "setup.cfg").is_file():
        return
    if all((root / leaf / "__init__.py").is_file() for leaf in _MAPPED) and \
            not any(isinstance(f, _CloneFolders) for f in sys.meta_path):
        sys.meta_path.append(_CloneFolders(root))
