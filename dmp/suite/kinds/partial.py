"""The paper's partial table: methods by tasks in the partial setting (the target holds a subset of the source
classes), one block per dataset."""
from __future__ import annotations

from . import register
from .per_task import PerTask


@register
class Partial(PerTask):
    name = "partial"
    title = "Recognition rates (%) under the partial setting"
    order = 2
    setting = "partial"
