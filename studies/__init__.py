"""The research around the package dmp: each study of the reproduction (the evidence studies on small data, the
Office-31 study on the real images and its diagnoses) as one module that declares its runs as data and renders its
section of docs/evidence.md from the committed run folders. Snakemake trains the declared runs
(workflow/rules/studies.smk); ``python -m studies report`` renders the report. dmp never imports this package; it
uses only dmp's public names."""
