"""The Multi30k loader (lib/multi30k.py), on small files the tests write and serve themselves."""
import gzip
import hashlib
import http.server
import re
import threading
from functools import partial

import pytest

from lib import multi30k
from lib.multi30k import ChecksumError, DownloadError, load_multi30k

# The files the tests write are not the published ones: their checks are off unless a test sets its own.
UNCHECKED = {name: None for name in multi30k.CHECKSUMS}
EN = ["Two young guys are outside.", "A man in a blue shirt.", "Ein Hund? No: a dog!"]
DE = ["Zwei junge Männer sind im Freien.", "Ein Mann in einem blauen Hemd.", "Ein Hund läuft."]


def write_corpus(folder, en=EN, de=DE, stem="train"):
    """Gzipped stem.en.gz / stem.de.gz in folder; returns {file name: sha256}."""
    folder.mkdir(parents=True, exist_ok=True)
    sums = {}
    for lang, lines in (("en", en), ("de", de)):
        path = folder / f"{stem}.{lang}.gz"
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
        sums[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return sums


@pytest.fixture
def server(tmp_path):
    """A local HTTP server on tmp_path/served; yields (folder, base URL, list of requested paths)."""
    folder = tmp_path / "served"
    folder.mkdir()
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requests.append(self.path)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(folder)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{httpd.server_address[1]}/", requests
    httpd.shutdown()
    httpd.server_close()


def test_download_over_http_then_from_the_cache(server, tmp_path):
    folder, url, requests = server
    sums = write_corpus(folder)
    cache = tmp_path / "cache"
    assert load_multi30k("train", cache_dir=cache, base_url=url, checksums=sums) == list(zip(EN, DE))
    assert sorted(p.name for p in cache.iterdir()) == ["train.de.gz", "train.en.gz"]
    assert len(requests) == 2
    for f in folder.iterdir():
        f.unlink()  # the source is gone: a second call must not need it
    assert load_multi30k("train", cache_dir=cache, base_url=url, checksums=sums) == list(zip(EN, DE))
    assert len(requests) == 2


def test_file_urls_plain_files_and_the_split_names(tmp_path):
    src = tmp_path / "src"
    write_corpus(src, stem="val")
    cache = tmp_path / "cache"
    assert load_multi30k("valid", cache_dir=cache, base_url=src.as_uri(), checksums=UNCHECKED) == list(zip(EN, DE))
    assert load_multi30k("val", cache_dir=cache, base_url="file:///nonexistent/", checksums=UNCHECKED) == list(
        zip(EN, DE))
    hand = tmp_path / "by_hand"  # unzipped files put there by hand
    hand.mkdir()
    (hand / "test_2016_flickr.en").write_text("a dog .\r\na cat .\n", encoding="utf-8")
    (hand / "test_2016_flickr.de").write_text("ein Hund .\r\neine Katze .\n", encoding="utf-8")
    assert load_multi30k("test", cache_dir=hand, base_url="http://127.0.0.1:9/", checksums=UNCHECKED) == [
        ("a dog .", "ein Hund ."), ("a cat .", "eine Katze .")]
    with pytest.raises(ValueError, match="split"):
        load_multi30k("training", cache_dir=cache)


def test_checksum_mismatch_is_an_error_and_leaves_no_file(tmp_path):
    src = tmp_path / "src"
    sums = write_corpus(src)
    cache = tmp_path / "cache"
    wrong = {**sums, "train.de.gz": "0" * 64}
    with pytest.raises(ChecksumError) as info:
        load_multi30k("train", cache_dir=cache, base_url=src.as_uri(), checksums=wrong)
    assert "train.de.gz" in str(info.value) and "0" * 64 in str(info.value) and sums["train.de.gz"] in str(info.value)
    assert not (cache / "train.de.gz").exists()
    assert [p.name for p in cache.iterdir()] == ["train.en.gz"]  # the good file stays, no partial files
    # a damaged file in the cache is found too
    (cache / "train.en.gz").write_bytes(b"garbage")
    with pytest.raises(ChecksumError, match="Delete it"):
        load_multi30k("train", cache_dir=cache, base_url=src.as_uri(), checksums=sums)


def test_offline_gives_a_clear_error(tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError) as info:
        load_multi30k("train", cache_dir=cache, base_url="http://127.0.0.1:9/")
    message = str(info.value)
    assert "http://127.0.0.1:9/train.en.gz" in message and "no network" in message
    assert str(cache) in message and "train.de.gz" in message and "test_2016_flickr.en.gz" in message
    assert not cache.exists() or not list(cache.iterdir())
    assert isinstance(info.value, RuntimeError)


def test_a_missing_file_on_the_server(server, tmp_path):
    folder, url, _ = server
    with pytest.raises(DownloadError, match="404"):
        load_multi30k("train", cache_dir=tmp_path / "cache", base_url=url)


def test_files_of_different_length_are_an_error(tmp_path):
    src = tmp_path / "src"
    write_corpus(src, en=EN, de=DE[:2])
    with pytest.raises(ValueError, match="3 lines.*2"):
        load_multi30k("train", cache_dir=tmp_path / "cache", base_url=src.as_uri(), checksums=UNCHECKED)


def test_the_cache_folder_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "data"))
    assert multi30k.default_cache_dir() == tmp_path / "data" / "multi30k"
    write_corpus(tmp_path / "data" / "multi30k")
    assert load_multi30k("train", base_url="http://127.0.0.1:9/", checksums=UNCHECKED) == list(zip(EN, DE))
    monkeypatch.delenv("COURSE_DATA_DIR")
    assert multi30k.default_cache_dir().parts[-3:] == (".cache", "transformers-from-scratch", "multi30k")
    assert multi30k.BASE_URL.startswith("https://raw.githubusercontent.com/multi30k/dataset/")
    assert set(multi30k.CHECKSUMS) == {f"{s}.{l}.gz" for s in ("train", "val", "test_2016_flickr") for l in ("en", "de")}
    assert all(re.fullmatch("[0-9a-f]{32}", v) for v in multi30k.CHECKSUMS.values())  # published MD5s


def test_published_checksums_are_checked_by_default(tmp_path):
    """Files that are not the published ones fail the default (MD5) check; an MD5 of their own passes."""
    src = tmp_path / "src"
    write_corpus(src)
    with pytest.raises(ChecksumError, match=multi30k.CHECKSUMS["train.en.gz"]):
        load_multi30k("train", cache_dir=tmp_path / "cache", base_url=src.as_uri())
    md5 = {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in src.iterdir()}
    assert load_multi30k("train", cache_dir=tmp_path / "cache", base_url=src.as_uri(), checksums=md5) == list(
        zip(EN, DE))
