#!/usr/bin/env python3
"""check_webhook_install.py - the Challenge validating webhook as kustomize
and Helm install it, rendered without a cluster (kubectl kustomize, helm
template):

  - config/default and the chart's defaults have no webhook (existing
    installs keep working without cert-manager or a certificate);
  - config/with-webhook, the chart with webhook.enabled (self-signed) and
    with cert-manager's API served each make one ValidatingWebhookConfiguration
    whose webhook never blocks a deletion (CREATE of challenges only),
    fails fast (failurePolicy Fail, timeoutSeconds <= 10), never covers the
    operator's namespace nor kube-system, calls the path the operator serves
    (CTF_WEBHOOK_VALIDATE_CHALLENGE in operators/ctf/controller/webhook.h)
    through a Service whose targetPort is a port of the operator's
    container, and whose pods mount the certificate's Secret at the
    --webhook-cert-dir they are given;
  - config/with-webhook's CRDs serve v1beta1 beside v1alpha1 and store
    v1beta1; ChallengeDefinition's conversion calls /convert through the
    same Service, with the CA cert-manager injects from the same
    Certificate; config/default keeps v1alpha1 alone and no conversion;
  - the chart with webhook.conversion.enabled: the same two-version CRDs
    (files/crds-v1beta1), ChallengeDefinition converted through the
    release's webhook Service with the validating webhook's CA (its own or
    cert-manager's), kept on uninstall; without it, no CRD in templates;
    with conversion but no webhook, a refusal; every webhook Service
    publishes not-ready addresses;
  - the certificate: cert-manager's Certificate names the Service's DNS
    names and the configuration asks the cainjector for its CA; the
    chart's self-signed one verifies against the configuration's caBundle
    and names the Service.

Usage: check_webhook_install.py SRC KUBECTL HELM
"""
import base64
import os
import re
import subprocess
import sys
import tempfile

import yaml

SRC, KUBECTL, HELM = sys.argv[1:4]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def render(args):
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def kinds(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def served_path():
    text = open(os.path.join(SRC, "operators/ctf/controller/webhook.h")).read()
    return re.search(r'#define CTF_WEBHOOK_VALIDATE_CHALLENGE "([^"]+)"', text).group(1)


def check_install(name, docs, system_ns, cert_manager):
    vwcs = kinds(docs, "ValidatingWebhookConfiguration")
    if not check(len(vwcs) == 1, f"{name}: {len(vwcs)} ValidatingWebhookConfigurations"):
        return
    hooks = vwcs[0]["webhooks"]
    check(len(hooks) == 1, f"{name}: {len(hooks)} webhooks")
    h = hooks[0]
    for r in h["rules"]:
        check(r["operations"] == ["CREATE"], f"{name}: operations {r['operations']} (CREATE only)")
        check(r["resources"] == ["challenges"], f"{name}: resources {r['resources']}")
        check(r["apiGroups"] == ["ctf.kopc.io"], f"{name}: apiGroups {r['apiGroups']}")
    check(h["failurePolicy"] == "Fail", f"{name}: failurePolicy {h['failurePolicy']}")
    check(1 <= h["timeoutSeconds"] <= 10, f"{name}: timeoutSeconds {h['timeoutSeconds']}")
    check(h["sideEffects"] == "None", f"{name}: sideEffects")
    excluded = set()
    for e in h["namespaceSelector"]["matchExpressions"]:
        if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "NotIn":
            excluded |= set(e["values"])
    check({system_ns, "kube-system"} <= excluded,
          f"{name}: namespaceSelector excludes {sorted(excluded)}, not {system_ns} and kube-system")
    svc_ref = h["clientConfig"]["service"]
    check(svc_ref["path"] == served_path(), f"{name}: path {svc_ref['path']} is not what the operator serves")
    check(svc_ref["namespace"] == system_ns, f"{name}: Service namespace {svc_ref['namespace']}")
    svcs = [s for s in kinds(docs, "Service") if s["metadata"]["name"] == svc_ref["name"]]
    if not check(len(svcs) == 1, f"{name}: no Service {svc_ref['name']}"):
        return
    port = [p for p in svcs[0]["spec"]["ports"] if p["port"] == svc_ref.get("port", 443)]
    check(len(port) == 1, f"{name}: the Service has no port {svc_ref.get('port', 443)}")
    dep = kinds(docs, "Deployment")[0]
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    names = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    check(port and port[0]["targetPort"] in names, f"{name}: targetPort {port and port[0]['targetPort']} not a container port")
    args = c["args"]
    check("--webhook-bind" in args, f"{name}: no --webhook-bind")
    if "--webhook-bind" in args and port and port[0]["targetPort"] in names:
        bind = args[args.index("--webhook-bind") + 1]
        check(bind.endswith(f":{names[port[0]['targetPort']]}"), f"{name}: --webhook-bind {bind} is not the webhook port")
    cert_dir = args[args.index("--webhook-cert-dir") + 1] if "--webhook-cert-dir" in args else None
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    check(cert_dir in mounts, f"{name}: --webhook-cert-dir {cert_dir} is not mounted")
    secret = vols.get(mounts.get(cert_dir), {}).get("secret", {}).get("secretName")
    dns = {f"{svc_ref['name']}.{system_ns}.svc"}
    if cert_manager:
        certs = kinds(docs, "Certificate")
        if check(len(certs) == 1, f"{name}: {len(certs)} Certificates"):
            cert = certs[0]
            check(cert["spec"]["secretName"] == secret, f"{name}: the pods mount {secret}, the Certificate makes {cert['spec']['secretName']}")
            check(dns <= set(cert["spec"]["dnsNames"]), f"{name}: Certificate dnsNames {cert['spec']['dnsNames']}")
            ann = vwcs[0]["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
            check(ann == f"{system_ns}/{cert['metadata']['name']}", f"{name}: inject-ca-from {ann}")
            issuer = cert["spec"]["issuerRef"]["name"]
            check(any(i["metadata"]["name"] == issuer for i in kinds(docs, "Issuer")), f"{name}: no Issuer {issuer}")
    else:
        check(not kinds(docs, "Certificate"), f"{name}: a Certificate without cert-manager")
        secs = [s for s in kinds(docs, "Secret") if s["metadata"]["name"] == secret]
        if check(len(secs) == 1, f"{name}: no Secret {secret}"):
            data = secs[0]["data"]
            with tempfile.TemporaryDirectory() as tmp:
                ca, crt = os.path.join(tmp, "ca.crt"), os.path.join(tmp, "tls.crt")
                open(ca, "wb").write(base64.b64decode(h["clientConfig"]["caBundle"]))
                open(crt, "wb").write(base64.b64decode(data["tls.crt"]))
                v = subprocess.run(["openssl", "verify", "-CAfile", ca, crt], capture_output=True, text=True)
                check(v.returncode == 0, f"{name}: the certificate does not verify with caBundle: {v.stdout}{v.stderr}")
                san = subprocess.run(["openssl", "x509", "-in", crt, "-noout", "-ext", "subjectAltName"],
                                     capture_output=True, text=True).stdout
                check(all(f"DNS:{d}" in san for d in dns), f"{name}: SANs {san.strip()} lack {dns}")
            check(data.get("tls.key"), f"{name}: no tls.key")


def crds(docs):
    return {d["metadata"]["name"]: d for d in kinds(docs, "CustomResourceDefinition")}


def check_conversion(name, docs, system_ns, chart=False):
    """v1beta1 stored beside v1alpha1; definitions converted by the operator's /convert,
    through the validating webhook's Service, with the CA of its Certificate."""
    by_name = crds(docs)
    vwc = kinds(docs, "ValidatingWebhookConfiguration")[0]
    svc = vwc["webhooks"][0]["clientConfig"]["service"]
    for crd_name in ("challengedefinitions.ctf.kopc.io", "challenges.ctf.kopc.io"):
        crd = by_name.get(crd_name)
        if not check(crd, f"{name}: no CRD {crd_name}"):
            continue
        versions = {v["name"]: v for v in crd["spec"]["versions"]}
        check(sorted(versions) == ["v1alpha1", "v1beta1"], f"{name}: {crd_name} versions {sorted(versions)}")
        check(all(v["served"] for v in versions.values()), f"{name}: {crd_name}: a version not served")
        stored = [v["name"] for v in versions.values() if v["storage"]]
        check(stored == ["v1beta1"], f"{name}: {crd_name} stores {stored}")
        conv = crd["spec"].get("conversion", {})
        if crd_name.startswith("challenges."):
            check(conv.get("strategy") == "None", f"{name}: Challenge conversion {conv}")
            continue
        check(conv.get("strategy") == "Webhook", f"{name}: ChallengeDefinition conversion {conv}")
        ref = conv.get("webhook", {}).get("clientConfig", {}).get("service", {})
        check(ref.get("path") == "/convert", f"{name}: conversion path {ref.get('path')}")
        check((ref.get("namespace"), ref.get("name"), ref.get("port", 443)) ==
              (svc["namespace"], svc["name"], svc.get("port", 443)),
              f"{name}: conversion Service {ref} is not the webhook's {svc}")
        check(conv["webhook"].get("conversionReviewVersions") == ["v1"], f"{name}: conversionReviewVersions")
        ann = crd["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
        want = vwc["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
        if want:
            check(ann and ann == want, f"{name}: the CRD's inject-ca-from {ann}, the webhook's {want}")
        else:  # the chart's own CA: the same caBundle as the validating webhook's
            ca = conv.get("webhook", {}).get("clientConfig", {}).get("caBundle")
            check(not ann and ca and ca == vwc["webhooks"][0]["clientConfig"].get("caBundle"),
                  f"{name}: the conversion's caBundle is not the validating webhook's")
        if chart:
            check(crd["metadata"].get("annotations", {}).get("helm.sh/resource-policy") == "keep",
                  f"{name}: {crd_name} not kept on uninstall (helm.sh/resource-policy)")
        spec = versions["v1beta1"]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        check("maxUnavailable" in spec["update"]["properties"]["rolling"]["properties"] and
              "maxUnavailable" not in spec["update"]["properties"],
              f"{name}: v1beta1 update is not {{strategy, rolling: {{maxUnavailable}}}}")


def one_version(name, docs):
    for crd_name, crd in crds(docs).items():
        names = [v["name"] for v in crd["spec"]["versions"]]
        check(names == ["v1alpha1"] and "conversion" not in crd["spec"],
              f"{name}: {crd_name} has versions {names} or a conversion (needs the webhook)")


def no_webhook(name, docs):
    check(not kinds(docs, "ValidatingWebhookConfiguration"), f"{name}: has a webhook configuration")
    args = kinds(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    check("--webhook-bind" not in args, f"{name}: the operator serves a webhook")


chart = os.path.join(SRC, "charts/kopc-ctf")
helm = [HELM, "template", "ctf", chart, "-n", "ctf-system"]
default = render([KUBECTL, "kustomize", os.path.join(SRC, "config/default")])
no_webhook("config/default", default)
one_version("config/default", default)
with_webhook = render([KUBECTL, "kustomize", os.path.join(SRC, "config/with-webhook")])
check_conversion("config/with-webhook", with_webhook, "kopc-system")
no_webhook("the chart's defaults", render(helm))
check_install("config/with-webhook", with_webhook, "kopc-system", True)
check_install("the chart, self-signed", render(helm + ["--set", "webhook.enabled=true"]), "ctf-system", False)
check_install("the chart, cert-manager served",
              render(helm + ["--set", "webhook.enabled=true", "--api-versions", "cert-manager.io/v1"]),
              "ctf-system", True)
check_install("the chart, certManager.enabled=false though served",
              render(helm + ["--set", "webhook.enabled=true", "--set", "webhook.certManager.enabled=false",
                             "--api-versions", "cert-manager.io/v1"]), "ctf-system", False)

# The chart's conversion (webhook.conversion.enabled): the CRDs of
# files/crds-v1beta1 rendered with the release's Service and CA, kept on
# uninstall; the webhook's Service reaches replicas not yet Ready.
conv = ["--set", "webhook.enabled=true", "--set", "webhook.conversion.enabled=true"]
self_signed = render(helm + conv)
check_install("the chart with conversion, self-signed", self_signed, "ctf-system", False)
check_conversion("the chart with conversion, self-signed", self_signed, "ctf-system", chart=True)
with_cm = render(helm + conv + ["--api-versions", "cert-manager.io/v1"])
check_install("the chart with conversion, cert-manager", with_cm, "ctf-system", True)
check_conversion("the chart with conversion, cert-manager", with_cm, "ctf-system", chart=True)
# Rendered through fromYaml/toYaml, the CRDs must be the files, number for number.
for base in ("ctf.kopc.io_challengedefinitions.yaml", "ctf.kopc.io_challenges.yaml"):
    want = yaml.safe_load(open(os.path.join(chart, "files/crds-v1beta1", base)))
    got = crds(self_signed).get(want["metadata"]["name"], {}).get("spec", {})
    got = yaml.safe_load(yaml.safe_dump(got))
    got.get("conversion", {}).get("webhook", {}).pop("clientConfig", None)
    check(got == want["spec"], f"the chart renders {base} other than files/crds-v1beta1 has it")
for label, docs in (("the chart with the webhook", render(helm + ["--set", "webhook.enabled=true"])),
                    ("config/with-webhook", with_webhook), ("the chart with conversion", self_signed)):
    svc = [d for d in kinds(docs, "Service") if d["metadata"].get("labels", {}).get(
        "app.kubernetes.io/component") == "webhook"]
    check(len(svc) == 1 and svc[0]["spec"].get("publishNotReadyAddresses") is True,
          f"{label}: the webhook Service does not publish not-ready addresses")
check(not crds(render(helm + ["--set", "webhook.enabled=true"])),
      "the chart renders CRDs from templates without webhook.conversion.enabled")
try:
    render(helm + ["--set", "webhook.conversion.enabled=true"])
    check(False, "the chart renders webhook.conversion.enabled without webhook.enabled")
except subprocess.CalledProcessError as e:
    check("needs webhook.enabled" in e.stderr, f"the chart's refusal of conversion alone: {e.stderr}")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
