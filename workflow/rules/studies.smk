# The studies' runs (studies/catalog.py): every run a study declares is one job, as every cell of a table is, so no
# process pool or shell loop schedules training beside the DAG. Rules are thin: which runs a study has and their
# configs are declared in its module (studies/<study>.py, studies/office31/declared.py); a job is
# `python -m studies run <file>`, which also makes on demand what the run reads and no run writes (the pre-trained
# small CNNs, the weak-feature datasets: not committed, so as DAG steps they would retrain every committed run).
#   snakemake --cores 2 studies                every study's runs
#   snakemake --cores 2 study_comparison       one study's; `python -m studies runs comparison --only demo` lists a part
# The runs do not depend on the suite's config: any config (the default config/config.yaml) gives the same jobs.
# Rendered into docs/evidence.md by `python -m studies report`.
import studies.catalog as studies_catalog

STUDY_TARGETS = {name: [studies_catalog.target(r) for r in studies_catalog.declared(name)]
                 for name in studies_catalog.STUDIES}


localrules:
    studies,


rule studies:
    """Every run of every study (studies/catalog.py)."""
    input:
        [t for targets in STUDY_TARGETS.values() for t in targets],


for _study, _targets in STUDY_TARGETS.items():

    rule:
        name:
            f"study_{_study}"
        input:
            _targets,
        localrule: True


rule studies_run:
    """One declared run of a study: trained, or its diagnosis written (prototypes.json, geometry.json,
    diagnosis.json)."""
    output:
        "results/{run}/{file}",
    input:
        lambda w: studies_catalog.needs(studies_catalog.find(f"results/{w.run}/{w.file}")),
    wildcard_constraints:
        run="(evidence/runs|office31_lite/(departures|checks|diagnosis))/.+/seed[0-9]+",
        file="metrics.json|prototypes.json|geometry.json|diagnosis.json",
    log:
        "results/logs/studies/{run}/{file}.log",
    conda:
        ENV
    params:
        python=PYTHON,
    threads: 1
    shell:
        "{params.python:q} -m studies run {output:q} > {log:q} 2>&1"
