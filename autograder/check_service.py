"""A class's check service on JupyterHub: ``check("...")`` in a student's notebook, judged by the instructor's judges.

A student's server on the hub holds no hidden tests. Its ``check`` (``lib/checking.py``) posts the notebook's
id, the exercise and the kernel's history to ``$CHECK_URL/check`` (``settings.CHECK_URL``), with the server's own hub token.
This service, which the hub runs (``deploy/local/jupyterhub_config.py``, ``deploy/k8s/``):

- asks the hub whose token it is (``HubAuth``): a check is judged as the token's owner, never as a name the
  request gives, and a token without the scope ``access:services!service=<this service>`` is refused;
- lets each student have one check running and ``--rate`` checks a minute; more is answered 429 with the
  seconds to wait, so a student who floods it slows no one but themselves;
- judges with ``live.Service`` (spare sandboxed kernels; the judges in this process), ``--jobs`` at once,
  and refuses to start where kernels cannot be isolated (``sandbox.preflight``), as ``grade`` does;
- logs one line per check: who, which exercise, the points, the seconds.

What a check shows is the instructor's choice, per notebook: ``--mode full`` (points and messages, the
default), ``points`` or ``off``; ``--mode 08_encoder_decoder=points`` sets one notebook.

    python -m autograder.check_service --port 10102 [--jobs N] [--rate 20] [--mode [NOTEBOOK=]MODE ...]
"""
import argparse
import asyncio
import json
import logging
import os
import time
from collections import defaultdict, deque
from concurrent.futures import ThreadPoolExecutor

from tornado import web

from . import settings
from .settings import Limits, default_jobs
from .live import MAX_REQUEST, Service, modes_of

log = logging.getLogger("autograder.check_service")


class Limiter:
    """One check at a time per student, and at most ``rate`` a minute."""

    def __init__(self, rate: int):
        self.rate, self.running, self.recent = rate, set(), defaultdict(deque)

    def enter(self, who: str) -> str | None:
        """None when ``who`` may check now (then call ``leave``), else why not."""
        now = time.monotonic()
        recent = self.recent[who]
        while recent and now - recent[0] > 60:
            recent.popleft()
        if who in self.running:
            return "a check of yours is still running: wait for its answer"
        if len(recent) >= self.rate:
            return f"at most {self.rate} checks a minute: try again in {60 - (now - recent[0]):.0f} s"
        self.running.add(who)
        recent.append(now)
        return None

    def leave(self, who: str) -> None:
        self.running.discard(who)


def handlers(prefix: str, service: Service, limiter: Limiter, pool: ThreadPoolExecutor):
    from jupyterhub.services.auth import HubAuthenticated

    class Check(HubAuthenticated, web.RequestHandler):
        def check_xsrf_cookie(self):
            pass  # token-authenticated API: no cookie is accepted here (get_current_user takes tokens only)

        def get_current_user(self):
            if not self.request.headers.get("Authorization", "").startswith("token "):
                return None  # only a server's or a user's API token, never a browser's cookie
            return super().get_current_user()

        async def post(self):
            user = self.current_user
            if user is None:
                raise web.HTTPError(403, "a hub token with access to this service is needed")
            who = user["name"]
            try:
                request = json.loads(self.request.body)
                aid, exercise, history = str(request["assignment"]), str(request["exercise"]), request["history"]
                if not isinstance(history, list):
                    raise TypeError("history")
            except (ValueError, KeyError, TypeError):
                self.set_status(400)
                return self.finish({"error": "a request this service cannot read"})
            refused = limiter.enter(who)
            if refused:
                self.set_status(429)
                return self.finish({"error": refused})
            start = time.monotonic()
            try:
                answer = await asyncio.get_running_loop().run_in_executor(
                    pool, service.check, aid, exercise, [str(h) for h in history])
            except Exception as e:  # noqa: BLE001 - the grader's fault: said, and logged
                log.exception("check of %s %s for %s failed", aid, exercise, who)
                answer = {"error": f"the check could not run ({type(e).__name__}); try again"}
            finally:
                limiter.leave(who)
            log.info("%s %r %r: %s / %s in %.1f s", who, aid, exercise, answer.get("points", "-"),
                     answer.get("max", "-"), time.monotonic() - start)
            self.finish(answer)

    class Health(web.RequestHandler):
        def get(self):
            self.finish({"ok": True})

    return [(prefix + "check", Check), (prefix, Health), (prefix.rstrip("/"), Health)]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m autograder.check_service", description=__doc__.split("\n\n")[0])
    defaults = settings.Service()  # stated in autograder/settings.py
    parser.add_argument("--port", type=int, default=defaults.port)
    parser.add_argument("--ip", default="127.0.0.1")
    parser.add_argument("--jobs", type=int, default=default_jobs(), help="checks judged at once (default: cores)")
    parser.add_argument("--rate", type=int, default=defaults.rate,
                        help=f"checks a student may ask for in a minute (default {defaults.rate})")
    parser.add_argument("--notebooks", type=int, default=defaults.notebooks,
                        help=f"notebooks that keep spare kernels ready: the ones last checked (default {defaults.notebooks})")
    parser.add_argument("--mode", action="append", default=[], help=f"[NOTEBOOK=]full|points|off (default {defaults.mode})")
    parser.add_argument("--allow-unisolated", action="store_true",
                        help="judge even where kernels cannot be isolated (students' code could then read the tests)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from .sandbox import preflight
    why = preflight()
    if why and not args.allow_unisolated:  # a kernel of the service's own uid could read the hidden tests
        raise SystemExit(f"the check service needs kernels it can isolate, and cannot here: {why}. Run it where "
                         f"namespaces are allowed (as grade needs), or pass --allow-unisolated to accept that.")
    import torch
    torch.set_num_threads(1)
    from .settings import cap_grader_memory
    cap_grader_memory()  # the judges run references here, on arguments a kernel chose
    service = Service(Limits(), modes=modes_of(args.mode), jobs=args.jobs, notebooks=args.notebooks)
    pool = ThreadPoolExecutor(args.jobs)
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/check/")

    async def serve():
        app = web.Application(handlers(prefix, service, Limiter(args.rate), pool))
        app.listen(args.port, args.ip, max_body_size=MAX_REQUEST)
        log.info("checks on http://%s:%s%s (%s at once, %s a minute per student, modes %s)", args.ip, args.port,
                 prefix, args.jobs, args.rate, service.modes or defaults.mode)
        await asyncio.Event().wait()

    try:
        asyncio.run(serve())
    finally:
        service.close()

if __name__ == "__main__":
    main()
