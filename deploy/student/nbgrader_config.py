# nbgrader's settings in every student's server (deploy/config.yaml and deploy/local/ both point
# JUPYTER_CONFIG_PATH at this folder). The Assignments tab fetches from and submits to the exchange.
import os

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "transformers-from-scratch"
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
# Submissions are filed under the hub's user name. nbgrader takes the Unix user's name, except for
# `jovyan` (Zero to JupyterHub), so this line is needed where every server runs as one Unix user.
if os.environ.get("JUPYTERHUB_USER"):
    c.CourseDirectory.student_id = os.environ["JUPYTERHUB_USER"]
