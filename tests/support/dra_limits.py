"""The DRA limits (docs/kubernetes-facts.md) that the OpenAPI schema does not express.

Written apart from the package's own checks so that a test using it can catch the package out.
"""

from __future__ import annotations

import re
from typing import Any

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUANTITY = re.compile(r"^[0-9]+(Ki|Mi|Gi|Ti|Pi|Ei)?$")
MAX_REQUESTS = MAX_CONSTRAINTS = MAX_SELECTORS = MAX_DEVICES = 32
MAX_SUBREQUESTS = 8
MAX_CAPACITY_ENTRIES = 32  # per request's capacity.requests, from 1.38 (maxProperties=32)
MAX_CEL_BYTES = 10 * 1024


def template_problems(template: dict[str, Any]) -> list[str]:
    problems = []
    name = template["metadata"]["name"]
    if not (DNS_SUBDOMAIN.match(name) and len(name) <= 63):
        problems.append(f"template name {name!r} is not a DNS-1123 name of at most 63 characters")
    devices = template["spec"]["spec"]["devices"]
    requests = devices.get("requests", [])
    if not 1 <= len(requests) <= MAX_REQUESTS:
        problems.append(f"{len(requests)} requests")
    names = [r["name"] for r in requests]
    if len(set(names)) != len(names):
        problems.append(f"duplicate request names {names}")
    devices_total = 0
    for request in requests:
        if not DNS_LABEL.match(request["name"]):
            problems.append(f"request name {request['name']!r} is not a DNS label")
        if ("exactly" in request) == ("firstAvailable" in request):
            problems.append(
                f"request {request['name']} needs exactly one of exactly/firstAvailable"
            )
        if "exactly" in request:
            problems += _exact_problems(request["exactly"], request["name"])
            devices_total += request["exactly"].get("count", 1)
        else:
            subs = request["firstAvailable"]
            if not 1 <= len(subs) <= MAX_SUBREQUESTS:
                problems.append(f"request {request['name']} has {len(subs)} subrequests")
            sub_names = [s["name"] for s in subs]
            if len(set(sub_names)) != len(sub_names):
                problems.append(f"duplicate subrequest names {sub_names}")
            for sub in subs:
                if not DNS_LABEL.match(sub["name"]):
                    problems.append(f"subrequest name {sub['name']!r} is not a DNS label")
                problems += _exact_problems(sub, f"{request['name']}/{sub['name']}")
            devices_total += max(s.get("count", 1) for s in subs)
    if devices_total > MAX_DEVICES:
        problems.append(f"{devices_total} devices in one claim")
    constraints = devices.get("constraints", [])
    if len(constraints) > MAX_CONSTRAINTS:
        problems.append(f"{len(constraints)} constraints")
    for constraint in constraints:
        for ref in constraint.get("requests", []):
            if ref.split("/")[0] not in names:
                problems.append(f"constraint names unknown request {ref}")
        if sum(k in constraint for k in ("matchAttribute", "distinctAttribute")) != 1:
            problems.append("a constraint needs exactly one of matchAttribute/distinctAttribute")
    return problems


def _exact_problems(request: dict[str, Any], where: str) -> list[str]:
    problems = []
    if not request.get("deviceClassName"):
        problems.append(f"{where}: no deviceClassName")
    if request.get("allocationMode", "ExactCount") == "ExactCount" and request.get("count", 1) < 1:
        problems.append(f"{where}: count below 1")
    selectors = request.get("selectors", [])
    if len(selectors) > MAX_SELECTORS:
        problems.append(f"{where}: {len(selectors)} selectors")
    for selector in selectors:
        if len(selector["cel"]["expression"].encode()) > MAX_CEL_BYTES:
            problems.append(f"{where}: a CEL expression over 10 KiB")
    capacity = request.get("capacity", {}).get("requests", {})
    if len(capacity) > MAX_CAPACITY_ENTRIES:
        problems.append(f"{where}: {len(capacity)} capacity requests (1.38 takes at most 32)")
    for key, value in capacity.items():
        if not isinstance(value, str) or not QUANTITY.match(value):
            problems.append(f"{where}: capacity {key}={value!r} is not a whole quantity string")
    return problems


def pod_problems(pod: dict[str, Any]) -> list[str]:
    """Claims of a converted pod: DNS-label names, unique, and every container claim resolves."""
    spec = pod["spec"]
    problems = []
    claims = [c["name"] for c in spec.get("resourceClaims", [])]
    if len(set(claims)) != len(claims):
        problems.append(f"duplicate pod claim names {claims}")
    if "claims" in spec.get("resources", {}):
        problems.append("claims in pod-level resources (1.38 refuses them)")
    for claim in claims:
        if not DNS_LABEL.match(claim):
            problems.append(f"pod claim name {claim!r} is not a DNS label")
    for list_name in ("initContainers", "containers"):
        for container in spec.get(list_name, []):
            for ref in container.get("resources", {}).get("claims", []):
                if ref["name"] not in claims:
                    problems.append(f"container claim {ref['name']} has no pod claim")
    return problems
