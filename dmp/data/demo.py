"""The embedded demo dataset: 10 classes of simple shapes drawn in 4 domains that differ in style, generated
deterministically (numpy + PIL) as 32x32 RGB PNGs in the Office-31 layout ``<domain>/images/<class>/<file>``.

Domains: ``solid`` (filled colours on flat backgrounds), ``outline`` (thick outlines with a faint fill),
``noisy`` (shapes on textured noise) and ``blurry`` (grey and blurred). Each domain is drawn entirely in its
own style (``STYLE_PURITY`` = 1; a lower value mixes in the other domains' styles and makes the transfer
easier), as the domains of the real benchmarks are. Every image depends only on (domain, class, index), so the
data is identical on every machine.
"""
from __future__ import annotations

import glob
import math
import os
import re
import secrets
import shutil
from pathlib import Path

import numpy as np

DEMO_CLASSES = ("arrow", "circle", "cross", "diamond", "heart", "hexagon", "ring", "square", "star", "triangle")
DEMO_DOMAINS = (("solid", "S"), ("outline", "O"), ("noisy", "N"), ("blurry", "B"))
DEMO_PER_CLASS = 30
PRETRAIN_CLASSES = DEMO_CLASSES + ("chevron", "octagon", "pentagon", "rectangle", "semicircle", "trapezoid")
STYLE_PURITY = 1.0  # share of a domain drawn in its own style; lower = easier transfer (pure, as real benchmarks)
SIZE = 32
GENERATOR_VERSION = 2  # bump whenever the demo images change (drawing, styles): DVC then regenerates them


def declaration() -> dict:
    """What the generated demo data is a function of (``datasets/demo/source.json``, the DVC stage's input)."""
    return {"generator_version": GENERATOR_VERSION, "classes": list(DEMO_CLASSES),
            "domains": [name for name, _ in DEMO_DOMAINS], "per_class": DEMO_PER_CLASS, "size": SIZE,
            "style_purity": STYLE_PURITY, "layout": "<domain>/images/<class>/<class>_NNNN.png"}


def _outline(cls: str) -> list[list[tuple[float, float]]]:
    """Polygons (unit coordinates, centred at 0) of a class's shape; rings are drawn as two circles."""
    def regular(n, r=1.0, phase=0.0):
        return [(r * math.cos(phase + 2 * math.pi * k / n), r * math.sin(phase + 2 * math.pi * k / n))
                for k in range(n)]
    if cls in ("circle", "ring"):
        return [regular(40)]
    if cls == "square":
        return [regular(4, 1.0, math.pi / 4)]
    if cls == "diamond":
        return [[(0, -1), (0.6, 0), (0, 1), (-0.6, 0)]]
    if cls == "triangle":
        return [regular(3, 1.0, -math.pi / 2)]
    if cls == "hexagon":
        return [regular(6)]
    if cls == "star":
        return [[p for k in range(5) for p in (regular(5, 1.0, -math.pi / 2)[k],
                                                 regular(5, 0.42, -math.pi / 2 + math.pi / 5)[k])]]
    if cls == "cross":
        a, b = 0.3, 1.0
        return [[(-a, -b), (a, -b), (a, -a), (b, -a), (b, a), (a, a), (a, b), (-a, b), (-a, a), (-b, a),
                 (-b, -a), (-a, -a)]]
    if cls == "arrow":
        return [[(-1, -0.25), (0.2, -0.25), (0.2, -0.7), (1, 0), (0.2, 0.7), (0.2, 0.25), (-1, 0.25)]]
    if cls == "pentagon":
        return [regular(5, 1.0, -math.pi / 2)]
    if cls == "octagon":
        return [regular(8, 1.0, math.pi / 8)]
    if cls == "rectangle":
        return [[(-1, -0.45), (1, -0.45), (1, 0.45), (-1, 0.45)]]
    if cls == "trapezoid":
        return [[(-1, 0.6), (1, 0.6), (0.45, -0.6), (-0.45, -0.6)]]
    if cls == "semicircle":
        return [[(math.cos(t), -math.sin(t) + 0.4) for t in np.linspace(0, math.pi, 24)]]
    if cls == "chevron":
        return [[(-1, -0.6), (0, 0.2), (1, -0.6), (1, 0.1), (0, 0.9), (-1, 0.1)]]
    if cls == "heart":
        pts = [(16 * math.sin(t) ** 3, -(13 * math.cos(t) - 5 * math.cos(2 * t) - 2 * math.cos(3 * t)
                                         - math.cos(4 * t))) for t in np.linspace(0, 2 * math.pi, 40)]
        return [[(x / 17, (y + 2) / 17) for x, y in pts]]
    raise KeyError(cls)


def _place(poly, scale, angle, cx, cy):
    c, s = math.cos(angle), math.sin(angle)
    return [(cx + scale * (x * c - y * s), cy + scale * (x * s + y * c)) for x, y in poly]


def render(domain: str, cls: str, index: int):
    """One demo image (a PIL RGB image) of ``cls`` in the style of ``domain``."""
    names = [n for n, _ in DEMO_DOMAINS]
    rng = np.random.default_rng([20240, names.index(domain), DEMO_CLASSES.index(cls), index])
    if rng.random() >= STYLE_PURITY:  # a minority of each domain is drawn in another domain's style
        domain = str(rng.choice([n for n in names if n != domain]))
    return _draw(domain, cls, rng)


def render_pretrain(cls: str, index: int):
    """One image of the demo's stand-in for ImageNet (:data:`PRETRAIN_CLASSES`, style ``photo``: gradient
    backgrounds, random colours, filled or outlined, random blur and noise). It is no demo domain; the
    demo's backbone is pre-trained on it once (``python -m dmp pretrain-demo``) and fine-tuned in every run."""
    return _draw("photo", cls, np.random.default_rng([7, PRETRAIN_CLASSES.index(cls), index]))


def _draw(domain: str, cls: str, rng):
    from PIL import Image, ImageDraw, ImageFilter

    hi = 4  # draw at 4x and downsample: anti-aliased edges
    big = SIZE * hi
    light_bg = rng.random() < 0.5
    lo, hi_ = (170, 256) if light_bg else (0, 90)
    if domain == "solid":
        bg = tuple(int(v) for v in rng.integers(lo, hi_, 3))
        fg = tuple(int(v) for v in rng.permutation([rng.integers(0, 80), rng.integers(60, 200), 255]))
        fg = fg if not light_bg else tuple(int(v * 0.6) for v in fg)
        scale, angle, width, fill = rng.uniform(0.28, 0.42), rng.uniform(-0.35, 0.35), 0, True
    elif domain == "outline":
        bg = tuple(int(v) for v in rng.integers(lo, hi_, 3))
        fg = tuple(int(255 - v) for v in rng.integers(0, 90, 3))
        fg = fg if not light_bg else tuple(int(255 - v) for v in fg)
        scale, angle, width, fill = rng.uniform(0.28, 0.42), rng.uniform(-0.35, 0.35), 4, False
    elif domain == "noisy":
        bg = tuple(int(v) for v in rng.integers(lo, hi_, 3))
        fg = tuple(int(v) for v in rng.integers(0, 256, 3))
        while sum(abs(a - b) for a, b in zip(fg, bg)) < 200:
            fg = tuple(int(v) for v in rng.integers(0, 256, 3))
        scale, angle, width, fill = rng.uniform(0.28, 0.42), rng.uniform(-0.35, 0.35), 0, True
    elif domain == "photo":
        bg = tuple(int(v) for v in rng.integers(0, 256, 3))
        bg2 = tuple(int(v) for v in rng.integers(0, 256, 3))
        fg = tuple(int(v) for v in rng.integers(0, 256, 3))
        while sum(abs(a - b) for a, b in zip(fg, bg)) < 150:
            fg = tuple(int(v) for v in rng.integers(0, 256, 3))
        fill = bool(rng.random() < 0.6)
        scale, angle, width = rng.uniform(0.25, 0.45), rng.uniform(-0.6, 0.6), int(rng.integers(2, 5))
    elif domain == "blurry":
        g = int(rng.integers(lo, hi_))
        bg, fg = (g, g, g), tuple([int(np.clip(g + (-1 if light_bg else 1) * rng.integers(90, 160), 0, 255))] * 3)
        scale, angle, width, fill = rng.uniform(0.25, 0.45), rng.uniform(-0.35, 0.35), 0, True
    else:
        raise KeyError(f"unknown demo domain {domain!r}")
    img = Image.new("RGB", (big, big), bg)
    if domain == "photo":  # a linear gradient from bg to bg2
        ramp = np.linspace(0, 1, big)[:, None, None]
        grad = (1 - ramp) * np.array(bg) + ramp * np.array(bg2)
        img = Image.fromarray(np.broadcast_to(grad, (big, big, 3)).astype(np.uint8)).rotate(
            float(rng.uniform(0, 360)), fillcolor=bg)
    draw = ImageDraw.Draw(img)
    cx, cy = (big / 2 + rng.uniform(-0.12, 0.12) * big for _ in range(2))
    r = scale * big
    for poly in _outline(cls):
        pts = _place(poly, r, angle, cx, cy)
        if fill:
            draw.polygon(pts, fill=fg)
        else:  # a faint fill keeps a trace of the silhouette
            draw.polygon(pts, fill=tuple(int(0.5 * b + 0.5 * f) for b, f in zip(bg, fg)))
            draw.line(pts + pts[:1], fill=fg, width=width * hi, joint="curve")
    if cls == "ring":  # punch a hole (filled styles) / draw the inner circle (outline style)
        inner = _place(_outline("circle")[0], r * 0.55, 0.0, cx, cy)
        if fill:
            draw.polygon(inner, fill=bg)
        else:
            draw.line(inner + inner[:1], fill=fg, width=width * hi)
    img = img.resize((SIZE, SIZE), Image.LANCZOS)
    arr = np.asarray(img, dtype=np.float32)
    if domain == "noisy":
        stripes = 10 * np.sin(np.arange(SIZE)[:, None] * rng.uniform(0.5, 1.5) + rng.uniform(0, 6))
        arr = arr + rng.normal(0, 8, arr.shape) + stripes[..., None]
    elif domain == "blurry":
        img = Image.fromarray(arr.astype(np.uint8)).filter(ImageFilter.GaussianBlur(rng.uniform(0.5, 0.9)))
        arr = np.asarray(img, dtype=np.float32) + rng.normal(0, 6, arr.shape)
    elif domain == "photo":
        img = Image.fromarray(arr.astype(np.uint8)).filter(ImageFilter.GaussianBlur(rng.uniform(0, 0.8)))
        arr = np.asarray(img, dtype=np.float32) + rng.normal(0, rng.uniform(0, 8), arr.shape)
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def generate(root: Path, per_class: int = DEMO_PER_CLASS, progress: bool = True) -> Path:
    """Write the demo dataset under ``root`` (replaced atomically: built in a staging folder beside it, then moved
    into place). Returns ``root``.

    Only a folder of the tool's own is replaced: one that does not exist, is empty, or holds nothing but demo images
    (:func:`foreign_files`); a folder holding anything else is refused (``FileExistsError`` naming a file), never
    deleted. Folders are created with the process umask; staging folders of a killed earlier call are removed."""
    from tqdm import tqdm

    root = Path(root)
    foreign = foreign_files(root)
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise FileExistsError(f"{root} holds files that are not demo images ({foreign[0]}{more}): the demo is "
                              f"generated only into a new or empty folder, or over an earlier demo; give another "
                              f"--root, or move those files away")
    root.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(root)
    tmp = root.with_name(f".{root.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    tmp.mkdir()  # mode 0777 less the umask (tempfile.mkdtemp would make it 0700)
    try:
        jobs = [(d, c, i) for d, _ in DEMO_DOMAINS for c in DEMO_CLASSES for i in range(per_class)]
        for d, c, i in tqdm(jobs, desc="demo images", unit="img", disable=not progress):
            path = tmp / d / "images" / c / f"{c}_{i:04d}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            render(d, c, i).save(path, optimize=False)
        if root.exists():
            old = root.with_name(f".{root.name}.old-{os.getpid()}-{secrets.token_hex(4)}")
            os.replace(root, old)
            os.replace(tmp, root)
            shutil.rmtree(old)
        else:
            os.replace(tmp, root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


# A demo image's path in the generated folder (DEMO_DOMAINS, DEMO_CLASSES; any index).
_IMAGE = re.compile(r"(?P<domain>[a-z]+)/images/(?P<cls>[a-z]+)/(?P=cls)_\d{4}\.png")


def foreign_files(root: Path) -> list[str]:
    """The files under ``root`` (relative, sorted) that the demo generator does not write: what ``generate`` must
    not delete. Empty for a missing or empty folder and for an earlier demo."""
    root = Path(root)
    if not root.exists():
        return []
    if not root.is_dir():
        return [root.name]
    domains = {name for name, _ in DEMO_DOMAINS}
    out = []
    for path in sorted(root.rglob("*")):
        if path.is_dir() and not path.is_symlink():
            continue
        rel = path.relative_to(root).as_posix()
        m = _IMAGE.fullmatch(rel)
        if not (m and m["domain"] in domains and m["cls"] in DEMO_CLASSES and not path.is_symlink()):
            out.append(rel)
    return out


def remove_leftovers(root: Path) -> list[str]:
    """Remove the staging folders (``.<root>.tmp-<pid>-*``, ``.<root>.old-<pid>-*``) that a killed ``generate`` left
    beside ``root``, except those of a process still running; returns their names."""
    root = Path(root)
    removed = []
    for path in sorted(root.parent.glob(f".{glob.escape(root.name)}.*")):
        m = re.fullmatch(rf"\.{re.escape(root.name)}\.(tmp|old)-(?:(\d+)-)?\w+", path.name)
        if not m or not path.is_dir() or (m[2] and _running(int(m[2]))):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path.name)
    return removed


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return False  # (this process is not generating it: generate calls this before staging)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
