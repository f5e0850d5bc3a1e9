"""Fixtures for the dataset tests (import from test modules: ``from data_fixtures import *``).

- ``isolated``: the registry pointed at an empty ``datasets/`` and data folder in tmp_path; ``isolated.use(spec)``
  registers a (scaled) spec. It also points every HTTP(S) proxy at a closed loopback port, so a test can never
  reach a real host by mistake (direct loopback URLs bypass it).
- ``server``: a loopback HTTP server (Range requests, scripted failures: status, truncation, trickling, content
  type) at ``server.url(path)``.
- ``internet``: the same server as an HTTP(S) proxy standing in for the real mirror hosts (cloud.tsinghua.edu.cn,
  wjdcloud.blob.core.windows.net, csr.bu.edu, raw.githubusercontent.com, cdn.jsdelivr.net, drive.google.com and
  drive.usercontent.google.com with Google Drive's redirect, virus-scan confirmation form and quota page), over
  TLS with a test CA, so the registry's real mirror URLs are fetched, Google Drive ones through gdown.
- ``shared_copies``: the developers' read-only copies of office_caltech10 and mnist_usps (studies/shared_copies.py)
  placed as a user places a copy, linked under a temporary ``DMP_DATA_DIR``; the test is skipped where they are
  absent.
- ``build_packaging``: every packaging of the four datasets in its real layout, from deterministic tiny images
  (the same images in every packaging), including ImageCLEF's quirks.
"""
from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import re
import ssl
import tarfile
import threading
import time
import urllib.parse
import uuid
import zipfile
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from dmp.data import registry

__all__ = ["isolated", "shared_copies", "server", "internet", "build_packaging", "small_spec", "tiny_image", "PACKAGINGS",
           "Packaging", "DEAD", "checkout_datasets_state"]

DEAD = "http://127.0.0.1:9"  # a closed loopback port: connection refused at once


@functools.lru_cache(maxsize=None)
def tiny_image(seed: int, fmt: str = "JPEG") -> bytes:
    """A valid 6x6 image file (JPEG or PNG) of colours drawn from ``seed``."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)).save(buf, fmt)
    return buf.getvalue()


def checkout_datasets_state() -> dict[str, str]:
    """``{path: sha256}`` of what a test could wrongly write into this checkout's ``datasets/``: every lock file,
    the committed lists and declarations of the built-in datasets and ``dvc_stages.yaml`` (a missing file is absent
    from the dict).
    ``tests/conftest.py`` compares it before and after the session."""
    import hashlib

    from dmp.data.catalog import BUILTIN

    root = registry.PROJECT / "datasets"
    paths = set(root.glob("*/lock.json")) | set(root.glob("dvc_stages.yaml"))  # and which datasets have DVC stages
    for spec in BUILTIN:
        paths |= set((root / spec.name).glob("lists/*.txt")) | set((root / spec.name).glob("*.json"))
    return {p.relative_to(registry.PROJECT).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(paths)}


# ------------------------------------------------------------------------------------------------ packagings
@dataclass(frozen=True)
class Packaging:
    """One archive of a packaging: ``wrapper`` folder (or none), ``folders`` {registry domain: its folder in the
    archive}, class folders under ``<folder>/images/`` or directly."""
    file: str
    wrapper: str
    folders: dict = field(hash=False)
    images_dir: bool = False


_O31 = ("amazon", "dslr", "webcam")
_OH = {"Art": "Art", "Clipart": "Clipart", "Product": "Product", "Real_World": "Real World"}
PACKAGINGS = {
    "office31": {
        "tllib": [Packaging(f"{d}.tgz", "", {d: d}, True) for d in _O31],
        "original": [Packaging("domain_adaptation_images.tar.gz", "", {d: d for d in _O31}, True)],
        "wjdcloud": [Packaging("OFFICE31.zip", "OFFICE31", {d: d for d in _O31})],
    },
    "officehome": {
        "tllib": [Packaging(f"{d}.tgz", "", {d: d}) for d in _OH],
        "original": [Packaging("OfficeHomeDataset_10072016.zip", "OfficeHomeDataset_10072016", dict(_OH))],
        "wjdcloud": [Packaging("OfficeHome.zip", "OfficeHome", {**_OH, "Real_World": "RealWorld"})],
    },
    "imageclef": {"original": [Packaging("image_CLEF.zip", "image_CLEF", {d: d for d in "cipb"})]},
    "visda2017": {"original": [Packaging("train.tar", "", {"synthetic": "train"}),
                               Packaging("validation.tar", "", {"real": "validation"})]},
}


def _file_name(name: str, domain: str, cls: str, label: int, i: int) -> tuple[str, str]:
    """(file name, image format) as the real dataset names its images."""
    if name == "imageclef":
        return {"c": (f"{label + 100:03d}_{i + 1:04d}.jpg", "JPEG"), "i": (f"n0{label}69115_{i}.JPEG", "JPEG"),
                "p": (f"2008_{label:03d}{i:03d}.jpg", "JPEG"),
                "b": (f"{zlib.crc32(f'{label}-{i}'.encode()):08X}.jpg", "JPEG")}[domain]
    if name == "visda2017":
        return (f"src_1_{label:08d}_{i:04d}.png", "PNG") if domain == "synthetic" else (f"{cls}_{i}.jpg", "JPEG")
    return (f"frame_{i + 1:04d}.jpg" if name == "office31" else f"{i + 1:05d}.jpg"), "JPEG"


def _clef_lists(folder: str, d: str, items) -> bytes:
    """An ImageCLEF label list as published: CRLF line ends; the b and c lists name class sub-folders
    (``c/113.hummingbird/113_0114.jpg``) that the archive does not have; p lists its first images twice with
    different labels (nine in the real list)."""
    lines = []
    for fname, label in items:
        sub = f"{label + 100:03d}.class-{label}/" if d in "bc" else ""
        lines.append(f"{d}/{sub}{fname} {label}\r\n")
    return "".join(lines).encode()


def build_packaging(name: str, packaging: str, dest: Path, per_class: int = 2, *, skip_class: str | None = None,
                    corrupt: str | None = None, changed: str | None = None, domains=None, extra_class: int = 0,
                    p_duplicates: int = 2, padding: int = 0, totals: dict | None = None) -> list[Path]:
    """Write the archive(s) of ``packaging`` of dataset ``name`` into ``dest`` in their real layout, with
    ``per_class`` images per class and domain (``+ extra_class``). ``skip_class``: leave that class out;
    ``corrupt``: a domain whose first image is garbage; ``changed``: a domain whose first image has other bytes
    (same name). ImageCLEF: ``list/<d>List.txt`` with its quirks, ``p_duplicates`` p images listed twice.
    ``padding``: bytes of a macOS resource-fork member (``__MACOSX/``, skipped by the fetch) to make it larger.
    ``totals``: {domain: images} instead of ``per_class`` (spread over the classes, the first ones one more)."""
    spec = registry.get_dataset(name)
    out = []
    for pk in PACKAGINGS[name][packaging]:
        folders = {d: f for d, f in pk.folders.items() if domains is None or d in domains}
        if not folders:
            continue
        files: dict[str, bytes] = {}
        for d, folder in folders.items():
            listed, first = [], True
            for label, cls in enumerate(spec.classes):
                if cls == skip_class:
                    continue
                n = per_class if totals is None else totals[d] // len(spec.classes) + (
                    label < totals[d] % len(spec.classes))
                for i in range(n + extra_class):
                    fname, fmt = _file_name(name, d, cls, label, i)
                    data = tiny_image(zlib.crc32(f"{name}/{d}/{cls}/{i}".encode()), fmt)
                    if first and corrupt == d:
                        data = b"not an image at all"
                    if first and changed == d:
                        data = tiny_image(12345, fmt)
                    first = False
                    if name == "imageclef":
                        files[f"{folder}/{fname}"] = data
                        listed.append((fname, label))
                    else:
                        files[f"{folder}/{'images/' if pk.images_dir else ''}{cls}/{fname}"] = data
            if name == "imageclef":
                if d == "p":  # an image listed again under another class replaces one of that class's images
                    for k in range(p_duplicates):
                        src, (victim, vlabel) = listed[k * per_class], listed[-1 - k * per_class]
                        files.pop(f"{folder}/{victim}")
                        listed[-1 - k * per_class] = (src[0], vlabel)
                files[f"list/{d}List.txt"] = _clef_lists(folder, d, listed)
            if name == "visda2017":
                files[f"{folder}/image_list.txt"] = b"listing shipped with the archive\n"
        if name == "officehome" and packaging == "original":
            files["ImageInfo.csv"] = b"ImageName,Domain,Class\n"
        if padding:
            files["__MACOSX/._padding"] = np.random.default_rng(0).bytes(padding)
        dest_file = Path(dest) / pk.file
        dest_file.parent.mkdir(parents=True, exist_ok=True)
        write_archive(dest_file, {(f"{pk.wrapper}/" if pk.wrapper else "") + k: v for k, v in files.items()})
        out.append(dest_file)
    return out


def write_archive(path: Path, files: dict) -> Path:
    """A zip or tar(.gz) at ``path`` holding ``files`` {member name: bytes}, in sorted order."""
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path, "w") as zf:
            for rel, data in sorted(files.items()):
                zf.writestr(rel, data)
    else:
        with tarfile.open(path, "w:gz" if path.name.endswith("gz") else "w") as tar:
            for rel, data in sorted(files.items()):
                info = tarfile.TarInfo(rel)
                info.size, info.mtime = len(data), 0
                tar.addfile(info, io.BytesIO(data))
    return path


def small_spec(name: str, per_class: int, urls=None, sha256=None) -> registry.DatasetSpec:
    """The registry entry of ``name`` scaled to ``per_class`` images per class. ``urls``: None keeps the real
    mirror URLs (only for the ``internet`` fixture), else a function ``archive -> mirror URLs``."""
    spec = registry.get_dataset(name)
    archives = tuple(dataclasses.replace(a, sha256=sha256 or a.sha256,
                                         urls=a.urls if urls is None else tuple(urls(a))) for a in spec.archives)
    return dataclasses.replace(
        spec, archives=archives, images_per_class=per_class if spec.images_per_class else None,
        domains=tuple(dataclasses.replace(d, count=per_class * len(spec.classes),
                                          class_counts=(per_class,) * len(spec.classes) if d.class_counts else None)
                      for d in spec.domains))


@pytest.fixture
def shared_copies(tmp_path, monkeypatch):
    from studies import shared_copies as copies

    if not copies.present():
        pytest.skip(f"the evidence datasets' copies are not at {copies.SHARED}")
    monkeypatch.setenv("DMP_DATA_DIR", str(tmp_path / "shared_data"))
    assert sorted(copies.link()) == sorted(copies.COPIES)
    return copies


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """An empty project ``datasets/`` and data folder in tmp_path; ``isolated.use(spec)`` registers a spec."""
    monkeypatch.setattr(registry, "DATASETS_DIR", tmp_path / "datasets")
    monkeypatch.setenv("DMP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("DMP_DATASETS_DIR", raising=False)  # a lab's declarations outside the checkout: not here
    monkeypatch.delenv("DMP_DATASETS_DIR", raising=False)  # a lab's declarations folder (docs/datasets.md): not here
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, DEAD)
    for var in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(var, "127.0.0.1,localhost")
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


# ------------------------------------------------------------------------------------------------ the network
_DRIVE, _DRIVE_CONTENT = "drive.google.com", "drive.usercontent.google.com"
HOSTS = (_DRIVE, _DRIVE_CONTENT, "docs.google.com", "cloud.tsinghua.edu.cn", "wjdcloud.blob.core.windows.net",
         "csr.bu.edu", "raw.githubusercontent.com", "cdn.jsdelivr.net")


class _Handler(BaseHTTPRequestHandler):
    tunnel_host = None

    def log_message(self, *args):
        pass

    def do_CONNECT(self):  # noqa: N802 (http.server API): a TLS tunnel to an emulated host
        host = self.path.split(":")[0]
        self.send_response(200, "Connection established")
        self.end_headers()
        self.close_connection = True
        if host not in HOSTS:
            return
        try:
            conn = self.server.tls.wrap_socket(self.connection, server_side=True)
        except (ssl.SSLError, OSError):
            return
        handler = type("Tunnel", (_Handler,), {"tunnel_host": host})
        try:
            handler(conn, self.client_address, self.server)
        except (OSError, ssl.SSLError):
            pass

    def do_GET(self):  # noqa: N802
        srv = self.server
        if self.tunnel_host:
            url = f"https://{self.tunnel_host}{self.path}"
        elif self.path.startswith("http://"):
            url = self.path
        else:
            url = f"http://127.0.0.1:{srv.server_address[1]}{self.path}"
        parts = urllib.parse.urlsplit(url)
        key = _key(url)
        with srv.lock:
            srv.requests.append((url, self.headers.get("Range")))
            if len(srv.requests) > srv.max_requests:
                return self.send_error(429, "test server request budget exhausted")
        if parts.netloc in (_DRIVE, _DRIVE_CONTENT):
            return self._drive(parts)
        if parts.netloc not in HOSTS and parts.netloc != f"127.0.0.1:{srv.server_address[1]}":
            return self.send_error(502, "unknown host")
        self._serve(key, srv.files.get(key))

    def _drive(self, parts):
        """Google Drive as it answers today: uc?id= redirects to drive.usercontent.google.com, which shows the
        virus-scan form (one line, as Drive minifies it) unless confirm= and uuid= are given."""
        srv, q = self.server, urllib.parse.parse_qs(parts.query)
        fid = (q.get("id") or [""])[0]
        with srv.lock:
            entry = srv.drive.get(fid)
        if entry is None:
            return self._html(404, "<html><body><p>Sorry, the file you have requested does not exist.</p>"
                                   "</body></html>")
        data, filename, quota = entry
        if quota:
            return self._html(200, '<html><body><p class="uc-error-subcaption">Too many users have viewed or '
                                   'downloaded this file recently. Please try accessing the file again later.</p>'
                                   '</body></html>')
        if parts.netloc == _DRIVE:
            self.send_response(303)
            self.send_header("Location", f"https://{_DRIVE_CONTENT}/download?id={fid}&export=download")
            self.send_header("Content-Length", "0")
            return self.end_headers()
        if (q.get("confirm") or [""])[0] != "t" or not q.get("uuid"):
            form = (f'<form id="download-form" action="https://{_DRIVE_CONTENT}/download" method="get">'
                    f'<input type="submit" value="Download anyway"/><input type="hidden" name="id" value="{fid}">'
                    f'<input type="hidden" name="export" value="download"><input type="hidden" name="confirm" '
                    f'value="t"><input type="hidden" name="uuid" value="{uuid.uuid4()}"></form>')
            return self._html(200, "<!DOCTYPE html><html><head><title>Google Drive - Virus scan warning</title>"
                                   f"</head><body>\n{form}\n</body></html>")
        self._serve(None, data, {"Content-Disposition": f'attachment; filename="{filename}"'})

    def _html(self, status, text):
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _serve(self, key, data, headers=None):
        srv = self.server
        with srv.lock:
            status = srv.status.get(key)
            cut = srv.truncate.pop(key, None)
            trickle = srv.trickle.get(key)
            ctype = srv.content_type.get(key, "application/octet-stream")
            length = srv.no_length.get(key) is None
        if status or data is None:
            return self.send_error(status or 404)
        start = 0
        m = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if m and srv.ranges:
            start = int(m.group(1))
            if start >= len(data):
                return self.send_error(416)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if length:
            self.send_header("Content-Length", str(len(body)))
        else:
            self.close_connection = True
        self.end_headers()
        if trickle:
            stop = time.monotonic() + 30
            for i in range(len(body)):
                if time.monotonic() > stop:
                    break
                try:
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                except OSError:  # the client gave up
                    break
                time.sleep(trickle)
            return
        self.wfile.write(body[:cut] if cut is not None else body)
        if cut is not None:
            self.wfile.flush()
            self.close_connection = True


def _key(url: str) -> str:
    """A served file's key: its URL without the query (``?dl=1``)."""
    p = urllib.parse.urlsplit(url)
    return f"{p.scheme}://{p.netloc}{p.path}"


def _tls_context(tmp: Path) -> tuple[ssl.SSLContext, Path]:
    """A test CA and a certificate for HOSTS signed by it: the server context and the CA bundle's path."""
    pytest.importorskip("cryptography")  # installed with dvc (through asyncssh)
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def cert(subject, key, issuer, issuer_key, ca):
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
             .not_valid_after(now + datetime.timedelta(days=2))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
             .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                            critical=False))
        if ca:
            b = b.add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), True)
        else:
            b = (b.add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in HOSTS]), critical=False)
                 .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                 .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False, False), True))
        return b.sign(issuer_key, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dmp test CA")])
    ca = cert(ca_name, ca_key, ca_name, ca_key, True)
    leaf = cert(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOSTS[0])]), key, ca_name, ca_key, False)
    pem = serialization.Encoding.PEM
    (tmp / "ca.pem").write_bytes(ca.public_bytes(pem))
    (tmp / "leaf.pem").write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    (tmp / "leaf.key").write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption()))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp / "leaf.pem", tmp / "leaf.key")
    return ctx, tmp / "ca.pem"


def _start(tls=None):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.timeout = 10
    httpd.tls = tls
    httpd.lock = threading.Lock()
    httpd.files, httpd.status, httpd.truncate, httpd.content_type = {}, {}, {}, {}
    httpd.trickle, httpd.no_length, httpd.drive = {}, {}, {}
    httpd.requests, httpd.max_requests, httpd.ranges = [], 300, True
    httpd.url = lambda path: f"http://127.0.0.1:{httpd.server_address[1]}{path}"
    httpd.key = _key
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return httpd, thread


def _stop(httpd, thread):
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=10)


@pytest.fixture
def server():
    """A loopback HTTP server: ``server.files[url] = bytes`` serves a file (with Range support) where ``url`` is
    ``server.url(path)`` (``server.key(url)`` for a URL with a query); ``status[url] = 404`` fails it,
    ``truncate[url] = n`` cuts the next response after n bytes, ``trickle[url] = s`` sends one byte every s seconds,
    ``no_length[url] = True`` omits Content-Length; ``requests`` logs ``(url, Range header)``. Bounded to 300
    requests; stopped at teardown."""
    httpd, thread = _start()
    try:
        yield httpd
    finally:
        _stop(httpd, thread)


@pytest.fixture
def internet(isolated, tmp_path, monkeypatch):
    """The loopback server as the HTTP(S) proxy of every request, emulating the real mirror hosts (TLS with a
    test CA trusted through REQUESTS_CA_BUNDLE). ``internet.files[real URL] = bytes`` serves a file;
    ``internet.drive[file id] = (bytes, file name, quota exceeded?)`` a Google Drive file."""
    tls, ca = _tls_context(tmp_path)
    httpd, thread = _start(tls)
    proxy = f"http://127.0.0.1:{httpd.server_address[1]}"
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(var, proxy)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(ca))
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    try:
        yield httpd
    finally:
        _stop(httpd, thread)
