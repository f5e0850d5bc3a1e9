"""The paper's figures from the suite's runs: which runs each figure needs (:mod:`dmp.figures.plan`), the data
behind each figure (:mod:`dmp.figures.data`, written as CSV), the matplotlib plots drawn from that data alone
(:mod:`dmp.figures.plot`), t-SNE (:mod:`dmp.figures.embed`, scikit-learn), report captions and table pages
(:mod:`dmp.figures.captions`, :mod:`dmp.figures.report`) and the command line (``python -m dmp.figures``)."""
from dmp.figures.plan import FIGURES, FigurePlan

__all__ = ["FIGURES", "FigurePlan"]
