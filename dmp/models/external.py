"""Your own architecture: ``backbone=timm:<model name>`` or ``backbone=torchvision:<model name>`` with a local
weights file (``weights_path=FILE``: ImageNet or self-supervised, any form :func:`~dmp.models.weights.load_weights`
accepts). The network is built without its classifier (timm ``num_classes=0``; torchvision's last ``fc`` /
``classifier`` / ``heads`` replaced by the identity from its first Linear on: ConvNeXt keeps the LayerNorm and the
flatten before it), the file is loaded with the same checks as the built-in backbones and recorded in metrics.json
(path and sha256). The input scaling is the model's: timm's ``pretrained_cfg`` mean/std
(:class:`~dmp.models.efficientnet.Rescale` from the pipeline's ImageNet mean/std), torchvision's ImageNet mean/std
(the pipeline's own).
"""
from __future__ import annotations

import inspect
import re

from torch import nn

from ..data.load import IMAGENET_MEAN, IMAGENET_STD
from .weights import WeightsUnavailableError, _say, _weights_file, load_weights

PATTERN = re.compile(r"(timm|torchvision):([A-Za-z0-9_.]+)")
"""What a ``backbone`` value of this route looks like."""


def _strip_classifier(model: nn.Module) -> tuple[str, int]:
    """Replace a torchvision model's classifier by the identity; returns its attribute name and input width. A
    classifier that is a Sequential keeps the layers before its first Linear but dropout (ConvNeXt's LayerNorm and
    flatten, MaxViT's pool, flatten and LayerNorm: the features are vectors); the rest become identities."""
    for name in ("fc", "classifier", "heads", "head"):
        head = getattr(model, name, None)
        if head is None:
            continue
        linears = [m for m in head.modules() if isinstance(m, nn.Linear)] if not isinstance(head, nn.Linear) else [head]
        if linears:
            first = next((i for i, m in enumerate(head) if isinstance(m, nn.Linear)), 0) \
                if isinstance(head, nn.Sequential) else 0
            if first:
                for i, m in enumerate(head):
                    if i >= first or isinstance(m, nn.Dropout):
                        head[i] = nn.Identity()
            else:
                setattr(model, name, nn.Identity())
            return name, linears[0].in_features
    raise ValueError(f"cannot find the classifier of {model.__class__.__name__} (a Linear layer under fc, classifier, "
                     f"heads or head): this route takes an image classification model "
                     f"(torchvision.models.list_models(module=torchvision.models))")


def build(name: str, pretrained: bool = True, weights_path: str | None = None, **_):
    """``(module, out_dim)`` for ``timm:<model>`` / ``torchvision:<model>``; ``pretrained`` needs ``weights_path``
    (nothing is downloaded on this route)."""
    m = PATTERN.fullmatch(name)
    if m is None:
        raise KeyError(f"backbone {name!r}: this route is timm:<model> or torchvision:<model>")
    lib, arch = m.groups()
    if pretrained and not weights_path:
        raise WeightsUnavailableError(f"backbone {name}: pass weights_path=FILE (the weights of your {arch}; this "
                                      f"route downloads nothing), or pretrained=false for a random initialisation")
    path = _weights_file(weights_path) if weights_path else None
    if lib == "timm":
        from .efficientnet import Rescale, _timm
        timm = _timm()
        if arch not in timm.list_models():
            raise KeyError(f"backbone {name!r}: timm has no model {arch!r} (timm.list_models() lists them)")
        model = timm.create_model(arch, pretrained=False, num_classes=0)
        out_dim = model.num_features
        cfg = getattr(model, "pretrained_cfg", {}) or {}
        if path is not None:
            _say(load_weights(model, path, name, classifier=cfg.get("classifier", "classifier")))
        module = nn.Sequential(Rescale(cfg.get("mean", IMAGENET_MEAN), cfg.get("std", IMAGENET_STD)),
                               model)
    else:
        import torchvision
        if arch not in torchvision.models.list_models():
            raise KeyError(f"backbone {name!r}: torchvision has no model {arch!r} (torchvision.models.list_models())")
        # weights=None alone is not enough: torchvision's segmentation and detection builders (fcn_resnet50,
        # fasterrcnn_resnet50_fpn, ...) then download their backbone's ImageNet weights (weights_backbone). On this
        # route the weights come from weights_path or nowhere.
        kwargs = {"weights": None}
        if "weights_backbone" in inspect.signature(torchvision.models.get_model_builder(arch)).parameters:
            kwargs["weights_backbone"] = None
        module = torchvision.models.get_model(arch, **kwargs)
        try:
            classifier, out_dim = _strip_classifier(module)
        except ValueError as exc:
            raise ValueError(f"backbone {name}: {exc}") from None
        if path is not None:
            _say(load_weights(module, path, name, classifier=classifier))
    module.weights_file = path
    return module, out_dim
