"""The course as a website: every learner notebook executed, then rendered as a static site.

``./course book`` (``python -m course_utils.book``) runs in four steps, one module each:

- ``execute``: each chapter of ``notebooks/`` runs in the course's own kernel, as a learner's
  Run All runs it (full length unless ``--smoke``), so every figure and printed result on the
  site is one this machine really produced. Exercises stay as a learner meets them: stubs,
  and checks that say "not attempted".
- ``pages``: each executed notebook gets a "run it yourself" note and goes, with ``book/``
  (the site's Sphinx configuration and front page), into a source folder.
- ``tool_env``: the site's tools (Sphinx, MyST-NB, the book theme; requirements-book.txt)
  live in an environment of their own under ``.course/venvs/``, never in the learner's .venv.
- ``verify``: the rendered site must have a page per chapter and no reference solution in it.
"""
