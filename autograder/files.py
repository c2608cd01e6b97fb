"""Reading and writing files without following links a student could have planted.

A submission folder, or a folder a kernel could write to, may hold a symbolic
link where a file is expected: reading it could leak another file into a
feedback page, writing it could overwrite another student's work or the
course itself. The grader reads what students made with ``read`` and writes
its own results with ``write``, both of which refuse links.
"""
import os
from pathlib import Path

MAX_NOTEBOOK = 64 * 2**20  # a notebook larger than this is not read


class UnsafeFile(OSError):
    """A path that is a link, not a regular file, or too large."""


def read(path, limit: int = MAX_NOTEBOOK) -> bytes:
    """The bytes of a regular file, never through a symbolic link (in its last component)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        if os.path.islink(path):
            raise UnsafeFile(f"{Path(path).name} is a symbolic link, not a notebook file") from None
        raise e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not _regular(st.st_mode):
            raise UnsafeFile(f"{Path(path).name} is not a regular file")
        if st.st_size > limit:
            raise UnsafeFile(f"{Path(path).name} is {st.st_size // 2**20} MiB; the limit is {limit // 2**20} MiB")
        return f.read(limit + 1)[:limit]


def write(path, data: bytes | str, root=None) -> None:
    """Create or replace ``path`` with ``data``, making its folders; refuses to write through a link,
    and (with ``root``) any folder between ``root`` and the file that is a link."""
    path = Path(path)
    if root is not None:
        _real_folders(Path(root), path.parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        raise UnsafeFile(f"{path} is a symbolic link; the grader does not write through links")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def _real_folders(root: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for part in [folder, *folder.parents]:
        if part == root or root not in part.parents:
            break
        if part.is_symlink():
            raise UnsafeFile(f"{part} is a symbolic link; the grader does not write through links")


def _regular(mode: int) -> bool:
    import stat
    return stat.S_ISREG(mode)
