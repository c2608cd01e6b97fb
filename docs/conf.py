"""The course's documentation site: Sphinx with MyST, so that every page is plain Markdown that reads the same
on a code host and in the built site. Built with warnings as errors by tests/test_docs.py:

    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""
project = "Transformers from scratch, autograded"
author = "the course's authors"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3  # links to a page's sections: [text](page.md#a-section)
html_theme = "furo"
html_title = project
html_static_path = []
