"""The real Multi30k corpus (English-German image captions), for those with a network.

``load_multi30k("train")`` downloads the raw files of task 1 from the
multi30k/dataset repository on GitHub once, keeps them in a cache folder, and
returns (english, german) pairs:

    train            29000 pairs   train.en.gz / train.de.gz
    valid (or val)    1014 pairs   val.en.gz / val.de.gz
    test              1000 pairs   test_2016_flickr.en.gz / test_2016_flickr.de.gz

The cache folder is ``cache_dir`` if given, else ``$COURSE_DATA_DIR/multi30k``
if that variable is set, else ``~/.cache/transformers-from-scratch/multi30k``.
A file already there is never downloaded again, so on a machine without a
network, put the six files there by hand (gzipped as above, or unzipped:
``train.en`` is read as well as ``train.en.gz``).

Every file's checksum is checked: ``CHECKSUMS`` holds the MD5 of the
published files (the values torchtext's Multi30k loader checks too), and the
``checksums`` argument adds to or replaces them (an MD5 or a SHA-256, told
apart by their length; None switches a check off). A download whose checksum does not match is deleted, never
cached. No network raises ``DownloadError`` naming the URL and the folder for
the files.
"""
import gzip
import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

BASE_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
SPLITS = {"train": "train", "valid": "val", "val": "val", "test": "test_2016_flickr"}
LANGUAGES = ("en", "de")
# MD5 of the published files, as torchtext records them for the same URLs.
CHECKSUMS = {
    "train.en.gz": "0065d13af80720a55ca8153d126e6627",
    "train.de.gz": "81ff90b99829c0cd4b1b587d394afd39",
    "val.en.gz": "2b69aa9253948ac9f67e94917272dd40",
    "val.de.gz": "6e0e229eb049e3fc99a1ef02fb2d5f91",
    "test_2016_flickr.en.gz": "ff2c0fcb4893a13bd73414306bc250ae",
    "test_2016_flickr.de.gz": "efd67d314d98489b716b145475101932",
}
TIMEOUT_S = 30


class DownloadError(RuntimeError):
    """A file could not be downloaded (no network, a wrong URL, a server error)."""


class ChecksumError(RuntimeError):
    """A file's checksum is not the expected one."""


def default_cache_dir() -> Path:
    """$COURSE_DATA_DIR/multi30k, or ~/.cache/transformers-from-scratch/multi30k."""
    root = os.environ.get("COURSE_DATA_DIR")
    if root:
        return Path(root).expanduser() / "multi30k"
    return Path.home() / ".cache" / "transformers-from-scratch" / "multi30k"


def hasher(expected: str):
    """A fresh hash object of the kind ``expected`` is written in: MD5 (32 hex digits) or SHA-256 (64)."""
    return hashlib.md5(usedforsecurity=False) if len(expected) == 32 else hashlib.sha256()


def checksum(path, expected: str) -> str:
    """The hex digest of the file at ``path``, of the same kind as ``expected``."""
    h = hasher(expected)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _by_hand(cache_dir: Path, names) -> str:
    return (f"If this machine has no network, download the files on one that has and put them in "
            f"{cache_dir}: {', '.join(names)} (gzipped, or unzipped without .gz).")


def fetch(name: str, cache_dir, base_url: str = BASE_URL, checksums=None, all_names=()) -> Path:
    """The path of file ``name`` in ``cache_dir``, downloaded from ``base_url`` + ``name`` if it is not there.

    Also accepts the unzipped file (``name`` without ".gz") put there by hand.
    """
    cache_dir = Path(cache_dir)
    checksums = CHECKSUMS if checksums is None else checksums
    expected = checksums.get(name)
    path = cache_dir / name
    if not path.exists() and name.endswith(".gz") and (cache_dir / name[:-3]).exists():
        path = cache_dir / name[:-3]
        expected = checksums.get(path.name)
    if path.exists():
        if expected and checksum(path, expected) != expected:
            raise ChecksumError(f"{path} has checksum {checksum(path, expected)}, expected {expected}: the file "
                                f"is damaged or not the published one. Delete it to download it again.")
        return path
    url = base_url.rstrip("/") + "/" + name
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=name + ".", suffix=".part", dir=cache_dir)
    try:
        h = hasher(expected or "")
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                for chunk in iter(lambda: response.read(1 << 20), b""):
                    h.update(chunk)
                    out.write(chunk)
        except urllib.error.HTTPError as e:
            raise DownloadError(f"could not download {url}: the server answered {e.code} {e.reason}. "
                                + _by_hand(cache_dir, all_names or [name])) from e
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            reason = getattr(e, "reason", e)
            raise DownloadError(f"could not download {url} ({reason}): there seems to be no network "
                                f"connection, or the server cannot be reached. "
                                + _by_hand(cache_dir, all_names or [name])) from e
        if expected and h.hexdigest() != expected:
            raise ChecksumError(f"{url} has checksum {h.hexdigest()}, expected {expected}: the download was "
                                f"damaged or the file changed on the server. Nothing was kept in {cache_dir}.")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def read_lines(path) -> list[str]:
    """The lines of a UTF-8 text file, gzipped (.gz) or plain, without their line ends."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        return [line.rstrip("\r\n") for line in f]


def load_multi30k(split: str = "train", cache_dir=None, base_url=None, checksums=None) -> list[tuple[str, str]]:
    """(english, german) pairs of Multi30k task 1: split "train", "valid" ("val") or "test" (2016 flickr).

    cache_dir: where the files are kept (see the module docstring for the default);
    base_url: where they are downloaded from (default BASE_URL; any URL urllib reads, file:// too);
    checksums: {file name: MD5 or SHA-256 hex}, added to CHECKSUMS (a value None switches a check off).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, not {split!r}")
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    table = {**CHECKSUMS, **(checksums or {})}
    names = [f"{SPLITS[split]}.{lang}.gz" for lang in LANGUAGES]
    all_names = [f"{stem}.{lang}.gz" for stem in dict.fromkeys(SPLITS.values()) for lang in LANGUAGES]
    en_path, de_path = (fetch(n, cache_dir, base_url or BASE_URL, table, all_names) for n in names)
    en, de = read_lines(en_path), read_lines(de_path)
    while en and de and en[-1] == "" and de[-1] == "":  # a trailing empty line
        en.pop(), de.pop()
    if len(en) != len(de):
        raise ValueError(f"{en_path} has {len(en)} lines but {de_path} has {len(de)}: the files do not belong "
                         f"together (a damaged or partial file?). Delete them to download them again.")
    return list(zip(en, de))
