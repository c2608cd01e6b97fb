"""Turn whatever a student handed in into a notebook nbgrader can grade.

Stock nbgrader crashes on a file that is not JSON, mis-grades a notebook whose
graded cells were deleted, duplicated or changed in type (nbgrader #1682,
#1083, #1941), and silently skips a test cell a student removed. Here the
submission is rebuilt on the release notebook's skeleton:

- every cell of the release that carries nbgrader metadata comes back, in the
  release's order: read-only cells (tests, checks, instructions) from the
  release itself (nbgrader then restores their hidden parts from the
  gradebook); answer cells with the student's text, in the release's cell type;
- a missing answer cell gets the release's stub, so it scores 0;
- the student's own extra cells stay where they were, after the graded cell
  that preceded them; a duplicated answer cell stays as a plain cell (so the
  notebook runs as the student ran it), a duplicated read-only cell is dropped;

Every repair is written down as a note for the report. Student code that
reaches for the grading machinery is flagged for a human (``autograder.scan``).
The submitted file is only read (never through a symbolic link), never written.
"""
import copy
import json
import warnings

import nbformat
from nbformat.corpus.words import generate_corpus_id

from . import course, files
from .scan import suspicious


def grade_id(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def read_bytes(path):
    """(bytes or None, notes): the submitted file, read once, or why it cannot be read."""
    try:
        return files.read(path), []
    except files.UnsafeFile as e:
        return None, [f"the notebook could not be read: {e}"]
    except OSError as e:
        return None, [f"the notebook could not be read: {e.strerror}"]


def read_submission(path):
    """(notebook or None, notes): the file parsed as a v4 notebook, or why it cannot be."""
    raw, notes = read_bytes(path)
    if raw is None:
        return None, notes
    if not raw.strip():
        return None, ["the notebook file is empty"]
    try:
        data = json.loads(raw.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as e:
        return None, [f"the notebook is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
                      f"was it saved completely?"]
    if not isinstance(data, dict) or "cells" not in data and "worksheets" not in data:
        return None, ["the file is JSON but not a Jupyter notebook (it has no cells)"]
    version = data.get("nbformat")
    if version not in (3, 4):
        return None, [f"the notebook has format version {version!r}; this course reads versions 3 and 4"]
    try:
        with warnings.catch_warnings():  # nbformat repairs duplicate cell ids with a warning
            warnings.simplefilter("ignore")
            nb = nbformat.reads(json.dumps(data), as_version=4)
    except Exception as e:  # noqa: BLE001 - nbformat raises many kinds for broken files
        return None, [f"the notebook could not be read as a Jupyter notebook: {type(e).__name__}: {e}"]
    notes = [] if version == 4 else [f"the notebook was converted from format version {version} to 4"]
    for cell in nb.cells:  # a cell whose source is a list of non-strings, or not even a list, or missing fields
        source = cell.get("source", "")
        if not isinstance(source, str):
            cell["source"] = "".join(map(str, source)) if isinstance(source, list) else str(source)
        cell.setdefault("metadata", {})
    return nb, notes


def rebuild(nb, assignment):
    """(graded notebook, notes, flags) from a parsed submission ``nb``."""
    release = nbformat.read(course.release_notebook(assignment), as_version=4)
    skeleton = [c for c in release.cells if grade_id(c)]
    # a test cell as the instructor wrote it (hidden tests included) is not "edited": checking a solution is quiet
    source = {grade_id(c): c.source for c in nbformat.read(course.source_notebook(assignment), as_version=4).cells}
    known = {grade_id(c): c for c in skeleton}
    notes, flags = [], []
    given = {c.source for c in release.cells if not grade_id(c)}  # the course's own cells, not the student's
    taken, extra_after = {}, {None: []}
    anchor = None
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid in known and gid not in taken:
            taken[gid] = cell
            anchor = gid
            continue
        if gid in known:  # a second copy of a graded cell
            if known[gid].metadata["nbgrader"].get("solution") and cell.get("cell_type") == "code":
                notes.append(f"cell {gid} appears twice; the second copy runs as a plain cell")
                cell = copy.deepcopy(cell)
                cell.metadata.pop("nbgrader", None)
            else:
                notes.append(f"cell {gid} appears twice; the copy was dropped")
                continue
        elif gid:
            cell = copy.deepcopy(cell)
            cell.metadata.pop("nbgrader", None)
        if cell.get("cell_type") not in ("code", "markdown", "raw"):
            continue
        cell = copy.deepcopy(cell)
        cell["id"] = generate_corpus_id()  # ids must stay unique in the rebuilt notebook
        extra_after.setdefault(anchor, []).append(cell)
    cells = []

    def add_own(extra, where):  # a cell the student added: run as written, without outputs, and scanned
        if extra.get("cell_type") == "code":
            extra.outputs, extra.execution_count = [], None
            if extra.get("source", "") not in given:
                flags.extend(f"a cell of your own {where}: {why}" for why in suspicious(extra.get("source", "")))
        cells.append(extra)
    for extra in extra_after[None]:
        add_own(extra, "before the first exercise")
    for ref in skeleton:
        gid = grade_id(ref)
        meta = ref.metadata["nbgrader"]
        mine = taken.get(gid)
        if meta.get("solution") and not meta.get("locked"):
            out = copy.deepcopy(ref)
            if mine is None:
                notes.append(f"answer cell {gid} is missing; it scores 0")
            else:
                out.source = mine.get("source", "")
                if mine.get("cell_type") != ref.cell_type:
                    notes.append(f"answer cell {gid} was changed from {ref.cell_type} to "
                                 f"{mine.get('cell_type')}; it was graded as {ref.cell_type}")
                if ref.cell_type == "code":
                    flags += [f"{gid}: {why}" for why in suspicious(out.source)]
        else:
            out = copy.deepcopy(ref)
            if mine is None:
                if meta.get("grade"):
                    notes.append(f"test cell {gid} was deleted; it was put back and run")
            elif mine.get("cell_type") != ref.cell_type:
                notes.append(f"cell {gid} was changed from {ref.cell_type} to {mine.get('cell_type')}; "
                             f"it was put back")
            elif mine.get("source", "") not in (ref.source, source.get(gid)) and meta.get("grade"):
                notes.append(f"test cell {gid} was edited; the original was put back")
        if out.cell_type == "code":
            out.outputs, out.execution_count = [], None
        cells.append(out)
        for extra in extra_after.get(gid, []):
            add_own(extra, f"after {gid}")
    graded = nbformat.v4.new_notebook(metadata=copy.deepcopy(release.metadata))
    graded.cells = cells
    return graded, notes, flags


def prepare(path, assignment, out_path):
    """Write the gradable notebook for the submission at ``path`` to ``out_path``.

    Returns (written?, notes, flags). When nothing can be read, nothing is
    written and the notes say why; the caller scores the notebook 0.
    """
    nb, notes = read_submission(path)
    if nb is None:
        return False, notes, []
    graded, more, flags = rebuild(nb, assignment)
    nbformat.write(graded, out_path)
    return True, notes + more, flags
