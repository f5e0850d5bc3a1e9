"""The paper's vanilla table: methods by tasks in the vanilla setting (every class shared), one block per dataset."""
from __future__ import annotations

from . import register
from .per_task import PerTask


@register
class Vanilla(PerTask):
    name = "vanilla"
    title = "Recognition rates (%) under the vanilla setting"
    order = 1
    setting = "vanilla"
