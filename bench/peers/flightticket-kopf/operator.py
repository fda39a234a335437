"""flightticket-kopf: the FlightTicket operator of examples/flightticket
written the idiomatic kopf way, as a benchmark peer for kopc (see
docs/benchmarks.md).

Same behaviour as the C example: for every FlightTicket, a "boarding pass"
ConfigMap the ticket controls (kopf.adopt), and the booking confirmed in
status (phase, seats, confirmedAt, observedGeneration). kopf's defaults
everywhere except one: the synchronous handlers run on 2 threads, the C
example's max_concurrent, so both have the same concurrency.

    kopf run --standalone --all-namespaces operator.py
"""
import datetime

import kopf
import kubernetes

core = None  # kubernetes.client.CoreV1Api, made at start-up


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    global core
    settings.execution.max_workers = 2  # = max_concurrent of the C example
    kubernetes.config.load_kube_config()  # $KUBECONFIG, like the other peers
    core = kubernetes.client.CoreV1Api()


def boarding_pass(name, spec):
    """The ConfigMap we want for the ticket, owned by it."""
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-boarding-pass"},
        "data": {
            "from": spec.get("from", ""),
            "to": spec.get("to", ""),
            "passenger": name,
            "seats": str(spec.get("number", 0)),
        },
    }
    kopf.adopt(cm)  # namespace and controller owner reference from the ticket
    return cm


@kopf.on.resume("flights.com", "v1", "flighttickets")
@kopf.on.create("flights.com", "v1", "flighttickets")
@kopf.on.update("flights.com", "v1", "flighttickets", field="spec")
def confirm(name, namespace, spec, status, meta, patch, logger, **_):
    """Make the boarding pass match the ticket, then confirm the ticket."""
    cm = boarding_pass(name, spec)
    try:
        core.create_namespaced_config_map(namespace, cm)
    except kubernetes.client.ApiException as e:
        if e.status != 409:
            raise
        core.replace_namespaced_config_map(cm["metadata"]["name"], namespace, cm)

    seats = spec.get("number")
    generation = meta.get("generation")
    if (status.get("phase") == "Confirmed" and status.get("seats") == seats
            and status.get("observedGeneration") == generation):
        return
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    patch.status["phase"] = "Confirmed"
    patch.status["seats"] = seats
    patch.status["confirmedAt"] = status.get("confirmedAt") or now  # first one stays
    patch.status["observedGeneration"] = generation
    logger.info(f"ticket confirmed, {seats} seats")
