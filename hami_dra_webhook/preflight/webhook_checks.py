"""check: the webhook itself. Its configuration, certificate, Service, endpoints and a preview
through it."""

from __future__ import annotations

import base64

from hami_dra_webhook.certs.verify import certificate_problem
from hami_dra_webhook.preflight.report import Installation, Report
from hami_dra_webhook.preflight.snapshot import Snapshot, failed


def webhook(snapshot: Snapshot, target: Installation, report: Report) -> None:
    config = snapshot.webhook_configuration
    if failed(config, "webhook", report):
        return
    if not isinstance(config, dict):  # Missing
        report.add(
            "FAIL",
            "webhook",
            f"MutatingWebhookConfiguration {target.webhook_configuration} does not exist",
            "helm install hami-dra-webhook charts/hami-dra-webhook",
        )
        return
    client = ((config.get("webhooks") or [{}])[0].get("clientConfig")) or {}
    bundle = base64.b64decode(client.get("caBundle") or "")
    secret = snapshot.tls_secret
    if failed(secret, "webhook certificate", report):
        return
    data = (secret.get("data") or {}) if isinstance(secret, dict) else {}
    problem = certificate_problem(bundle, base64.b64decode(data.get("tls.crt") or ""))
    if problem:
        report.add(
            "FAIL",
            "webhook certificate",
            problem,
            "with selfManaged certificates, restart the webhook pods; else renew the Secret",
        )
    else:
        report.add(
            "PASS",
            "webhook certificate",
            "the caBundle verifies the serving certificate, valid for more than 30 days",
        )
    if snapshot.webhook_url is not None:
        _webhook_url(snapshot, report)
    else:
        _webhook_service(snapshot, target, report)
    _preview(snapshot, bundle, target, report)


def _preview(snapshot: Snapshot, bundle: bytes, target: Installation, report: Report) -> None:
    """The workloads' preview: there, and trusting the same CA as the pod webhook (it is
    failurePolicy Ignore: a wrong caBundle would only make `kubectl apply` silent)."""
    config = snapshot.preview_configuration
    if failed(config, "workloads' preview", report):
        return
    name = target.webhook_configuration
    if not isinstance(config, dict):
        report.add(
            "WARN",
            "workloads' preview",
            f"no ValidatingWebhookConfiguration {name}: kubectl apply of a workload does not"
            " say what its pods become, and their refusals show only as FailedCreate events",
            "helm upgrade with workloadPreview.enabled=true (the default from chart 0.2.0)",
        )
        return
    webhooks = config.get("webhooks") or []
    stale = [
        str(w.get("name"))
        for w in webhooks
        if base64.b64decode((w.get("clientConfig") or {}).get("caBundle") or "") != bundle
    ]
    if stale:
        report.add(
            "WARN",
            "workloads' preview",
            f"{', '.join(stale)} of ValidatingWebhookConfiguration {name} does not trust the"
            " pod webhook's CA: kubectl apply gets no preview (failurePolicy Ignore)",
            "with selfManaged certificates, restart the webhook pods; with cert-manager, check"
            " its cainjector",
        )
    else:
        report.add(
            "PASS",
            "workloads' preview",
            f"kubectl apply of a workload says what its pods become ({len(webhooks)} webhooks)",
        )


def _webhook_url(snapshot: Snapshot, report: Report) -> None:
    answer = snapshot.webhook_url
    assert answer is not None
    url = answer.url
    if answer.status is None:
        report.add(
            "WARN",
            "webhook url",
            f"kube-apiserver calls {url}; not reachable from here ({answer.unreachable})",
            "check it from where kube-apiserver runs",
        )
    elif answer.status == 200:
        report.add("PASS", "webhook url", f"kube-apiserver calls {url}; its /readyz answers 200")
    else:
        report.add(
            "FAIL",
            "webhook url",
            f"kube-apiserver calls {url}; its /readyz answers {answer.status}",
            "see the webhook's log and /readyz body",
        )


def _webhook_service(snapshot: Snapshot, target: Installation, report: Report) -> None:
    slices = snapshot.endpoint_slices
    if failed(slices, "webhook service", report):
        return
    ready = sum(
        1
        for s in (slices if isinstance(slices, list) else [])
        for e in s.get("endpoints") or []
        if (e.get("conditions") or {}).get("ready")
    )
    service = f"{target.namespace}/{target.service}"
    if ready:
        report.add("PASS", "webhook service", f"{ready} ready endpoint(s) behind {service}")
    else:
        report.add(
            "FAIL",
            "webhook service",
            f"no ready endpoint behind {service}",
            f"kubectl -n {target.namespace} get pods; GPU pods are refused while it is down"
            " (failurePolicy Fail)",
        )
