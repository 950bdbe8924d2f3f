"""``cotaudit view``: one self-contained HTML page for one or more evaluated runs.

:mod:`evaluator.viewer.data` maps a run's files (``eval/report.json``,
``eval/certificates.jsonl``, ``results.jsonl``, ``manifest.json``) to the page's data; it is
the only module that knows their field names. :mod:`evaluator.viewer.page` packs that data
(compressed chunks) into the HTML page with the viewer's own CSS and JavaScript
(``assets/``). See ``docs/viewer.md``.
"""
