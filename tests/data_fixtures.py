"""Fixtures for the dataset tests: an isolated registry (datasets/ and data in tmp_path), archives in the real
on-disk layouts of Office-31, Office-Home, ImageCLEF-DA and VisDA-2017 built from generated images, and a
loopback HTTP server (Range requests, scripted failures) to fetch them from. Import from test modules:
``from data_fixtures import *``."""
from __future__ import annotations

import dataclasses
import io
import re
import tarfile
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from dmp.data import registry

__all__ = ["isolated", "server", "build_archive", "small_spec", "tiny_image", "LAYOUTS"]


def tiny_image(seed: int, fmt: str = "JPEG") -> bytes:
    """A valid 6x6 image file (JPEG or PNG) of a colour drawn from ``seed``."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)).save(buf, fmt)
    return buf.getvalue()


# dataset -> its archives: (file name, wrapper folder inside the archive, {registry domain: folder in the
#            archive}, image file pattern, image format)
LAYOUTS = {
    "office31": [("domain_adaptation_images.tar.gz", "", {"amazon": "amazon/images", "dslr": "dslr/images",
                                                          "webcam": "webcam/images"}, "frame_{:04d}.jpg", "JPEG")],
    "officehome": [("OfficeHomeDataset_10072016.zip", "OfficeHomeDataset_10072016",
                    {"Art": "Art", "Clipart": "Clipart", "Product": "Product", "Real_World": "Real World"},
                    "{:05d}.jpg", "JPEG")],
    "imageclef": [("image_CLEF.zip", "image_CLEF", {"c": "c", "i": "i", "p": "p", "b": "b"}, "{}.jpg", "JPEG")],
    "visda2017": [("train.tar", "", {"synthetic": "train"}, "{:06d}.png", "PNG"),
                  ("validation.tar", "", {"real": "validation"}, "{:06d}.jpg", "JPEG")],
}


def build_archive(name: str, dest_dir: Path, per_class: int = 2, *, skip_class: str | None = None,
                  corrupt: str | None = None, domains=None) -> list[Path]:
    """Write the archive(s) of dataset ``name`` into ``dest_dir`` in their real layout, with ``per_class``
    generated images per class and domain. ``skip_class``: leave that class folder out; ``corrupt``: a domain
    whose first image is replaced by garbage bytes. ImageCLEF gets its flat domain folders plus
    ``list/<d>List.txt`` label files; VisDA its ``image_list.txt``. Returns the archive paths."""
    spec = registry.get_dataset(name)
    out = []
    seed = 0
    for filename, wrap, folders, pattern, fmt in LAYOUTS[name]:
        folders = {d: f for d, f in folders.items() if domains is None or d in domains}
        if not folders:
            continue
        files: dict[str, bytes] = {}
        for d, folder in folders.items():
            lines = []
            for label, cls in enumerate(spec.classes):
                if cls == skip_class:
                    continue
                for i in range(per_class):
                    seed += 1
                    if name == "imageclef":
                        rel = f"{folder}/{pattern.format(seed)}"
                        lines.append(f"{rel} {label}\n")
                    else:
                        rel = f"{folder}/{cls}/{pattern.format(i + 1)}"
                    data = tiny_image(seed, fmt)
                    if corrupt == d and not any(k.startswith(folder + "/") for k in files):
                        data = b"not an image at all"
                    files[rel] = data
            if name == "imageclef":
                files[f"list/{d}List.txt"] = "".join(lines).encode()
            if name == "visda2017":
                files[f"{folder}/image_list.txt"] = b"listing shipped with the archive\n"
        dest = Path(dest_dir) / filename
        dest.parent.mkdir(parents=True, exist_ok=True)
        prefix = f"{wrap}/" if wrap else ""
        if filename.endswith(".zip"):
            with zipfile.ZipFile(dest, "w") as zf:
                for rel, data in sorted(files.items()):
                    zf.writestr(prefix + rel, data)
        else:
            with tarfile.open(dest, "w:gz" if filename.endswith("gz") else "w") as tar:
                for rel, data in sorted(files.items()):
                    info = tarfile.TarInfo(prefix + rel)
                    info.size, info.mtime = len(data), 0
                    tar.addfile(info, io.BytesIO(data))
        out.append(dest)
    return out


def small_spec(name: str, per_class: int, urls=lambda filename: (), sha256=None,
               domains=None) -> registry.DatasetSpec:
    """The registry entry of ``name`` scaled to ``per_class`` images per class, with the archives
    :func:`build_archive` writes, each served from ``urls(filename)``."""
    spec = registry.get_dataset(name)
    doms = tuple(d for d in spec.domains if domains is None or d.name in domains)
    archives = tuple(
        registry.Archive(filename, tuple(urls(filename)), tuple(d for d in folders if d in {x.name for x in doms}),
                         sha256=sha256, aliases=(("Real World", "Real_World"),),
                         extras=("list",) if name == "imageclef" else ())
        for filename, _, folders, _, _ in LAYOUTS[name] if set(folders) & {x.name for x in doms})
    return dataclasses.replace(
        spec, domains=tuple(dataclasses.replace(d, count=per_class * len(spec.classes)) for d in doms),
        archives=archives, images_per_class=per_class if spec.images_per_class else None,
        label_lists=tuple(x for x in spec.label_lists if domains is None or x[0] in domains))


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """Point the registry at an empty project ``datasets/`` and data folder in tmp_path; ``isolated.use(spec)``
    registers a (scaled) spec in place of the built-in one."""
    monkeypatch.setattr(registry, "DATASETS_DIR", tmp_path / "datasets")
    monkeypatch.setenv("DMP_DATA_DIR", str(tmp_path / "data"))
    original = registry._all_specs
    overrides = {}
    monkeypatch.setattr(registry, "_all_specs", lambda: {**original(), **overrides})

    class Env:
        path = tmp_path

        @staticmethod
        def use(spec):
            overrides[spec.name] = spec
            return spec
    return Env


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802 (http.server API)
        srv = self.server
        with srv.lock:
            srv.requests.append((self.path, self.headers.get("Range")))
            if len(srv.requests) > srv.max_requests:
                self.send_error(429, "test server request budget exhausted")
                return
            status = srv.status.get(self.path)
            data = srv.files.get(self.path)
            cut = srv.truncate.pop(self.path, None)
        if status or data is None:
            self.send_error(status or 404)
            return
        start = 0
        m = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if m and srv.ranges:
            start = int(m.group(1))
            if start >= len(data):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Type", srv.content_type.get(self.path, "application/octet-stream"))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[:cut] if cut is not None else body)
        if cut is not None:
            self.wfile.flush()
            self.close_connection = True


@pytest.fixture
def server():
    """A loopback HTTP server: ``server.files[path] = bytes`` serves a file (with Range support),
    ``server.status[path] = 404`` fails it, ``server.truncate[path] = n`` cuts the next response after n
    bytes, ``server.url(path)`` is its URL and ``server.requests`` logs ``(path, Range header)``.
    Bounded to 200 requests; each connection times out after 10 s; stopped at teardown."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.timeout = 10
    httpd.lock = threading.Lock()
    httpd.files, httpd.status, httpd.truncate, httpd.content_type = {}, {}, {}, {}
    httpd.requests, httpd.max_requests, httpd.ranges = [], 200, True
    httpd.url = lambda path: f"http://127.0.0.1:{httpd.server_address[1]}{path}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
