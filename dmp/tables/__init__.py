"""The paper's tables from the suite's runs: aggregation over seeds (:mod:`dmp.tables.aggregate`), the paper's
reported numbers (:mod:`dmp.tables.reported`), LaTeX/Markdown/comparison output (:mod:`dmp.tables.render`) and
the command line (:mod:`dmp.tables.cli`, ``python -m dmp.tables``)."""
