"""The driver's fence: a Kubernetes Lease held by the one driver that may run the app's query.

Two drivers must never run one query on one checkpoint: a driver whose Pod was force-deleted from
a lost node may still be running, a rolling hand-over starts the new driver before the old one has
stopped. The operator names a Lease per app (``STREAMAPP_LEASE``); the driver

1. **acquires** it before its query starts: at once when nobody holds it or the holder released
   it; otherwise only once the holder has not renewed it for ``leaseDurationSeconds`` as this
   driver observed it (its own monotonic clock, as client-go's leader election does), or once
   its ``renewTime`` is older than the duration plus :data:`SKEW` by this driver's wall clock
   (a driver that just came up need not watch a silent Lease for a whole duration);
2. **renews** it every ``duration / 5`` from a thread;
3. **checks** it before every micro-batch writes (:meth:`Lease.check`, a hook of the sink's
   gate): a batch is written only while the last successful renewal is younger than
   ``duration * 2 / 3``, so a driver cut off from the API server stops writing well before
   another could take over;
4. **releases** it after a clean stop, so that the next driver starts at once.

With ``exactly_once_v2`` the transactional producers fence a zombie as well (the same
transactional ids: the newer ``initTransactions`` aborts and fences the older producer).

The Lease is read and written through :mod:`apiserver`, the in-cluster client.
"""

from __future__ import annotations

import datetime
import logging
import os
import pathlib
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from streamapp.runtime import errors
from streamapp.runtime.apiserver import ENV, SERVICEACCOUNT, InCluster, LeaseError

__all__ = [
    "HAND_OVER_WAIT_S",
    "KEEPING_UP_ANNOTATION",
    "STANDBY_ANNOTATION",
    "Cancelled",
    "Fenced",
    "Lease",
    "from_env",
]

#: The Lease annotation a driver waiting in standby writes (its identity): the operator's signal
#: to stop the running driver in a rolling hand-over.
STANDBY_ANNOTATION = "streamapp.io/standby"
#: The Lease annotation its holder writes (its identity) once its query keeps up — its first
#: micro-batch done, or no input waiting: a rolling hand-over's old driver keeps its Spark up,
#: idle, until then (:meth:`Lease.await_successor`).
KEEPING_UP_ANNOTATION = "streamapp.io/keeping-up"
#: How long a driver that released the Lease waits for its successor to keep up.
HAND_OVER_WAIT_S = 10.0
DEFAULT_DURATION = 15
#: How far apart the clocks of two drivers may be: a Lease whose renewTime is older than its
#: duration plus this, by the waiting driver's wall clock, is taken over without observing it for
#: a whole duration first (a new driver that just came up need not wait a full duration more).
#: Safe while clocks differ by less than duration / 3 + SKEW (the holder stops writing after
#: 2/3 of the duration without a renewal): 10 s.
SKEW = 5

_log = logging.getLogger("streamapp.lease")


class Fenced(errors.StreamAppError):
    """This driver no longer holds the app's Lease: it must not write another batch."""


class Cancelled(errors.StreamAppError):
    """The driver was asked to stop while it waited for the Lease (it never started its query)."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Lease:
    """One driver's view of the app's Lease (see the module's description)."""

    def __init__(
        self,
        api: InCluster,
        *,
        namespace: str,
        name: str,
        identity: str,
        duration: int = DEFAULT_DURATION,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api, self.namespace, self.name, self.identity = api, namespace, name, identity
        self.duration = duration
        self._clock = clock
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self._renewed: float | None = None  # monotonic time of the last successful write as holder
        self._lost: str | None = None
        self._stop = threading.Event()
        self._writing = threading.Lock()  # a read-modify-write of the Lease at a time
        self._thread: threading.Thread | None = None
        self._listeners: list[Callable[[], None]] = []

    # -- acquiring ------------------------------------------------------------------------------

    def acquire(
        self, timeout: float | None = None, poll: float = 0.5, cancelled: Callable[[], bool] = lambda: False
    ) -> float:
        """Block until this driver holds the Lease; returns the seconds it waited. Logs who holds
        it while waiting. ``timeout`` (None: wait as long as it takes) raises :class:`LeaseError`;
        ``cancelled()`` turning true (a SIGTERM) raises :class:`Cancelled`."""
        began = self._clock()
        seen: tuple[Any, ...] | None = None
        seen_at = began
        said = 0.0
        announced = False
        while True:
            code, lease = self.api.request("GET", self._path)
            if code == 404:
                if self._create():
                    return self._clock() - began
                continue
            if code != 200:
                raise LeaseError(f"reading Lease {self.namespace}/{self.name}: HTTP {code} {_message(lease)}")
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity") or ""
            record = (holder, spec.get("renewTime"))
            if record != seen:
                seen, seen_at = record, self._clock()
            duration = int(spec.get("leaseDurationSeconds") or self.duration)
            expired = self._clock() - seen_at >= duration or _age(spec.get("renewTime")) > duration + SKEW
            if not holder or holder == self.identity or expired:
                if self._take(lease, expired=bool(holder) and holder != self.identity):
                    return self._clock() - began
                continue
            if not announced:
                announced = self._announce(lease)
            now = self._clock()
            if now - said >= 10 or said == 0.0:
                _log.warning(
                    "waiting for Lease %s/%s: held by %s (its last renewal seen %.0f s ago; taken over "
                    "when it is released or not renewed for %d s)",
                    self.namespace, self.name, holder, now - seen_at, duration,
                )  # fmt: skip
                said = now
            if cancelled():
                raise Cancelled(
                    f"stopped while waiting for Lease {self.namespace}/{self.name} (held by {holder})"
                )
            if timeout is not None and now - began > timeout:
                raise LeaseError(
                    f"Lease {self.namespace}/{self.name} still held by {holder} after {timeout:.0f} s"
                )
            time.sleep(poll)

    def other_holder(self) -> str | None:
        """Who else holds the Lease and renewed it recently (a running driver), or None (nobody,
        this driver, an expired holder, or the API server not answering)."""
        try:
            code, lease = self.api.request("GET", self._path)
        except LeaseError:
            return None
        if code != 200:
            return None
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        duration = int(spec.get("leaseDurationSeconds") or self.duration)
        if not holder or holder == self.identity or _age(spec.get("renewTime")) > duration + SKEW:
            return None
        return str(holder)

    def _create(self) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": self._spec(transitions=0),
        }
        code, answer = self.api.request(
            "POST", f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases", body
        )
        if code == 409:
            return False  # another driver created it first: read it again
        if code not in (200, 201):
            raise LeaseError(f"creating Lease {self.namespace}/{self.name}: HTTP {code} {_message(answer)}")
        self._renewed = self._clock()
        self._changed()
        _log.info("holding Lease %s/%s (created) as %s", self.namespace, self.name, self.identity)
        return True

    def _announce(self, lease: dict[str, Any]) -> bool:
        """Say on the Lease that this driver waits in standby (the operator hands over then)."""
        annotations = dict(lease["metadata"].get("annotations") or {})
        if annotations.get(STANDBY_ANNOTATION) == self.identity:
            return True
        lease["metadata"]["annotations"] = {**annotations, STANDBY_ANNOTATION: self.identity}
        code, _ = self.api.request("PUT", self._path, lease)
        return code == 200  # 409: the holder renewed meanwhile; said on the next look

    def _take(self, lease: dict[str, Any], *, expired: bool) -> bool:
        annotations = dict(lease["metadata"].get("annotations") or {})
        if STANDBY_ANNOTATION in annotations:
            del annotations[STANDBY_ANNOTATION]
            lease["metadata"]["annotations"] = annotations
        spec = lease.get("spec") or {}
        previous = spec.get("holderIdentity") or ""
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if previous == self.identity else 1)
        lease["spec"] = self._spec(transitions=transitions)
        code, answer = self.api.request("PUT", self._path, lease)
        if code == 409:
            return False  # someone else wrote first (resourceVersion): look again
        if code != 200:
            raise LeaseError(f"taking Lease {self.namespace}/{self.name}: HTTP {code} {_message(answer)}")
        self._renewed = self._clock()
        self._changed()
        how = f"taken over from {previous} (not renewed for {self.duration} s)" if expired else "free"
        _log.info("holding Lease %s/%s as %s (%s)", self.namespace, self.name, self.identity, how)
        return True

    def _spec(self, *, transitions: int) -> dict[str, Any]:
        now = _now()
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    # -- holding --------------------------------------------------------------------------------

    def renew(self) -> bool:
        """One renewal: True when this driver still holds the Lease."""
        with self._writing:
            return self._renew()

    def _renew(self) -> bool:
        code, lease = self.api.request("GET", self._path)
        if code != 200:
            _log.warning("renewing Lease %s/%s: HTTP %s %s", self.namespace, self.name, code, _message(lease))
            return False
        holder = (lease.get("spec") or {}).get("holderIdentity") or ""
        if holder != self.identity:
            self._lost = f"Lease {self.namespace}/{self.name} is held by {holder or 'nobody'} now"
            self._changed()
            return False
        lease["spec"]["renewTime"] = _now()
        code, answer = self.api.request("PUT", self._path, lease)
        if code != 200:
            _log.warning(
                "renewing Lease %s/%s: HTTP %s %s", self.namespace, self.name, code, _message(answer)
            )
            return False
        self._renewed = self._clock()
        self._changed()
        return True

    def start_renewing(self, on_lost: Callable[[str], None] | None = None) -> None:
        """Renew every ``duration / 5`` s in a daemon thread; ``on_lost(reason)`` once the Lease is
        no longer held (another holder, or no successful renewal for ``duration * 2 / 3``)."""

        def loop() -> None:
            while not self._stop.wait(self.duration / 5):
                try:
                    self.renew()
                except LeaseError as exc:
                    _log.warning("renewing Lease %s/%s: %s", self.namespace, self.name, exc)
                reason = self.problem()
                if reason is not None:
                    _log.error("%s: this driver stops writing", reason)
                    if on_lost is not None:
                        on_lost(reason)
                    return

        self._thread = threading.Thread(target=loop, name=f"lease-{self.name}", daemon=True)
        self._thread.start()

    def problem(self) -> str | None:
        """Why this driver may not write now, or None while it holds the Lease."""
        if self._lost is not None:
            return self._lost
        if self._renewed is None:
            return f"Lease {self.namespace}/{self.name} was never acquired by {self.identity}"
        age = self._clock() - self._renewed
        if age > self.duration * 2 / 3:
            return (
                f"Lease {self.namespace}/{self.name} not renewed for {age:.1f} s (another driver may "
                f"take it over after {self.duration} s)"
            )
        return None

    def writable_for(self) -> tuple[float, str]:
        """The seconds from now this driver may still write (≤ 0: not now), and why it may not
        once they are up — what a gate outside Python (``BatchGate.java``) checks each batch by."""
        reason = self.problem()
        if reason is not None or self._renewed is None:
            return 0.0, reason or "the Lease is not held"
        limit = self.duration * 2 / 3
        return self._renewed + limit - self._clock(), (
            f"Lease {self.namespace}/{self.name} not renewed for {limit:.1f} s (another driver may "
            f"take it over after {self.duration} s)"
        )

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every acquisition, renewal, loss and release of the Lease."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in list(self._listeners):
            try:
                listener()
            except Exception as exc:  # noqa: BLE001 - a listener's failure must not stop the renewals
                _log.warning("Lease %s/%s: a listener failed: %s", self.namespace, self.name, exc)

    def check(self, batch_id: int) -> None:
        """Raise :class:`Fenced` unless this driver holds the Lease (before a batch writes)."""
        reason = self.problem()
        if reason is not None:
            raise Fenced(f"micro-batch {batch_id} not written: {reason}")

    def mark_keeping_up(self) -> bool:
        """Say on the Lease that this driver's query keeps up (:data:`KEEPING_UP_ANNOTATION`);
        True once it is written. A failure only warns: the driver it took over from then shuts down
        after :data:`HAND_OVER_WAIT_S`."""
        try:
            for _ in range(3):
                with self._writing:  # not between a renewal's read and write (a 409 for it)
                    code, lease = self.api.request("GET", self._path)
                    if code != 200 or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                        return False
                    annotations = dict(lease["metadata"].get("annotations") or {})
                    lease["metadata"]["annotations"] = {**annotations, KEEPING_UP_ANNOTATION: self.identity}
                    code, answer = self.api.request("PUT", self._path, lease)
                if code == 200:
                    return True
                if code != 409:  # 409: written meanwhile (the operator); read it again
                    break
        except LeaseError as exc:
            answer = {"message": str(exc)}
        _log.warning("Lease %s/%s: keeping up not noted: %s", self.namespace, self.name, _message(answer))
        return False

    def await_successor(
        self, timeout: float = HAND_OVER_WAIT_S, poll: float = 0.2
    ) -> tuple[str | None, float | None]:
        """After :meth:`release`: the driver taking over — the one waiting in standby, or the new
        holder — and the seconds until it noted that it keeps up (None: not within ``timeout``);
        ``(None, None)`` at once when no driver waits to take over."""
        began = self._clock()
        successor: str | None = None
        while True:
            try:
                code, lease = self.api.request("GET", self._path)
            except LeaseError:
                return successor, None
            if code != 200:
                return successor, None
            annotations = lease["metadata"].get("annotations") or {}
            if successor is None:
                holder = (lease.get("spec") or {}).get("holderIdentity") or ""
                waiting = annotations.get(STANDBY_ANNOTATION) or ""
                successor = next((d for d in (holder, waiting) if d and d != self.identity), None)
                if successor is None:
                    return None, None
            elapsed = self._clock() - began
            if annotations.get(KEEPING_UP_ANNOTATION) == successor:
                return successor, elapsed
            if elapsed > timeout:
                return successor, None
            time.sleep(poll)

    def release(self) -> bool:
        """Stop renewing and hand the Lease back (holder cleared), if still held; True if it was."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        try:
            code, lease = self.api.request("GET", self._path)
            if code != 200 or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return False
            lease["spec"]["holderIdentity"] = None
            lease["spec"]["renewTime"] = _now()
            code, answer = self.api.request("PUT", self._path, lease)
            if code == 200:
                _log.info("released Lease %s/%s", self.namespace, self.name)
                return True
            else:
                _log.warning(
                    "releasing Lease %s/%s: HTTP %s %s", self.namespace, self.name, code, _message(answer)
                )
        except LeaseError as exc:
            _log.warning("releasing Lease %s/%s: %s (it expires by itself)", self.namespace, self.name, exc)
        finally:
            self._renewed = None
            self._changed()
        return False


def _age(stamp: str | None) -> float:
    """Seconds since a Lease's renewTime by this machine's wall clock (0 when unknown)."""
    if not stamp:
        return 0.0
    try:
        then = datetime.datetime.fromisoformat(stamp)
    except ValueError:
        return 0.0
    return (datetime.datetime.now(datetime.UTC) - then).total_seconds()


def _message(body: Any) -> str:
    return str(body.get("message", "")) if isinstance(body, dict) else ""


def from_env(env: Mapping[str, str] | None = None) -> Lease | None:
    """The driver's Lease from ``STREAMAPP_LEASE`` (None when unset: a local run, no fence)."""
    env = os.environ if env is None else env
    name = env.get(ENV, "").strip()
    if not name:
        return None
    namespace = env.get("STREAMAPP_NAMESPACE") or _file_namespace(env)
    pod = env.get("STREAMAPP_DRIVER_POD_NAME") or env.get("HOSTNAME") or ""
    if not namespace or not pod:
        raise LeaseError(
            f"{ENV}={name}: the driver's namespace and Pod name are needed "
            "(STREAMAPP_NAMESPACE, STREAMAPP_DRIVER_POD_NAME)"
        )
    # One identity per process, never reused: a Pod re-created under the same name is another
    # holder. The Pod's UID lets the operator release the Lease of a driver it saw end.
    identity = f"{pod}/{env.get('STREAMAPP_DRIVER_POD_UID') or uuid.uuid4().hex[:12]}"
    duration = int(env.get("STREAMAPP_LEASE_SECONDS") or DEFAULT_DURATION)
    return Lease(
        InCluster.from_env(env), namespace=namespace, name=name, identity=identity, duration=duration
    )


def _file_namespace(env: Mapping[str, str]) -> str:
    path = pathlib.Path(env.get("STREAMAPP_SERVICEACCOUNT_DIR") or SERVICEACCOUNT) / "namespace"
    return path.read_text().strip() if path.exists() else ""
