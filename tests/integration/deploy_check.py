#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Reads Tollgate's manifests, as `kubectl kustomize` renders them, for
tests/integration/test_deploy.sh. RENDERED is that multi-document YAML (a
file, or - for stdin); DIR (--deploy) is deploy/, for the files that are not
objects (the dashboard).

  deploy_check.py RENDERED parse            every object loads; prints Kind/name, one a line
  deploy_check.py RENDERED generated        the agents' ConfigMap is generated (tollgate-HASH,
                                            immutable) and the DaemonSet mounts it; the
                                            allocator's StatefulSet mounts its policy's alone;
                                            prints the agents' ConfigMap's name
  deploy_check.py RENDERED daemonset        what the DaemonSet must hold (with a budgets block: its
                                            ServiceAccount, the projected token where tokenFile
                                            points, the allocator's CA from a ConfigMap where
                                            caFile points, no Secret); prints each problem
  deploy_check.py RENDERED monitoring [--release R] [--runbook-base URL]
                                            PodMonitors and PrometheusRule: selectors, labels,
                                            the `up` label, alerts' severity, summary and
                                            runbook_url, the billing rule; each problem
  deploy_check.py RENDERED runbook FILE     every alert has a heading of its name in FILE
                                            (docs/runbook.md), the anchor its runbook_url names
  deploy_check.py RENDERED conflist         the ConfigMap's conflist, as its bytes
  deploy_check.py RENDERED policy           the allocator's policy (tollgate-allocator-policy's
                                            policy.json), as its bytes
  deploy_check.py RENDERED agent-args       the agent container's command, one word a line
  deploy_check.py RENDERED allocator        what the allocator's StatefulSet and Services must hold,
                                            its policy's ConfigMap (one name, not immutable,
                                            mounted as a directory where --policy points), its
                                            trust (HTTPS from its Secret, the JWKS read with its
                                            own token under the issuer's discovery alone, an
                                            issuer, its own name advertised, etcd over https with
                                            a client certificate) and the conflist's budgets
                                            block (how to reach it alone)
  deploy_check.py RENDERED allocator-args   the allocator container's command, one word a line
  deploy_check.py RENDERED etcd             components/etcd: three members the allocator's --etcd names,
                                            TLS with client and peer certificates, probes on
                                            the metrics port
  deploy_check.py RENDERED certificates     components/cert-manager: every Secret mounted is a
                                            Certificate's, the serving one names the Service and
                                            every replica, two CAs, etcd's server one clientAuth
  deploy_check.py RENDERED cert-spec SECRET the Certificate of SECRET (names, usages) as JSON
  deploy_check.py RENDERED etcd-args        the etcd container's command, one word a line
  deploy_check.py RENDERED etcd-tls BASE    components/etcd-tls over the base (BASE, rendered):
                                            https, certificates in a mounted Secret, the rest
                                            of the command the base's
  deploy_check.py RENDERED rules OUT        the PrometheusRule's spec as a Prometheus rules file
  deploy_check.py --deploy DIR RENDERED dashboard-rules OUT
                                            every dashboard query as a recording rule (Grafana's
                                            variables replaced), for promtool to parse
  deploy_check.py --deploy DIR RENDERED names
                                            metric names the rules and the dashboard read
                                            (recorded names excluded); one a line
  deploy_check.py --deploy DIR RENDERED undefined
                                            recorded names (level:metric:op) read but not recorded
  deploy_check.py --deploy DIR RENDERED no-budgets
                                            a rendering without components/budgets: no allocator,
                                            no rule reading its or the budgets' series, no budgets
                                            block; DIR/dashboard.json reads none of them either
  deploy_check.py RENDERED kubelet-command KIND/NAME CONTAINER [--field PATH=VALUE]...
                                            the container's command and args as kubelet runs
                                            them: $(VAR) expanded from its env, fieldRefs from
                                            the --field values; one word a line
  deploy_check.py RENDERED kubelet-resolv KIND/NAME NAMESPACE CLUSTER-DNS NODE-RESOLV-CONF
                                            the resolv.conf kubelet writes for its dnsPolicy
  deploy_check.py RENDERED kubelet-mounts KIND/NAME CONTAINER
                                            the files its Secret, ConfigMap and projected
                                            mounts hold: PATH KIND NAME KEY, one a line
  deploy_check.py RENDERED kubelet-configmaps KIND/NAME CONTAINER
                                            the container's ConfigMap mounts: MOUNTPATH NAME
                                            SUBPATH (- for a directory mount), one a line
  deploy_check.py dns-serve LOG ADDR=NAME:IP,...  [...]
                                            a DNS server on ADDR:53 (UDP) answering those names
                                            and NXDOMAIN for others; each query logged to LOG
  deploy_check.py sniff IFNAME SECONDS PATTERN
                                            the first group of PATTERN in a packet on IFNAME
                                            ("# sniffing" on stderr once it reads them)
  deploy_check.py teeth -                   lines WHAT<TAB>RENDERED<TAB>CHECK [ARGS] on stdin (daemonset,
                                            allocator, etcd, certificates, monitoring): each
                                            judged in this one process; WHAT<TAB>refused|taken
  deploy_check.py api-serve ADDR:PORT CERT KEY TOKEN-FILE JWKS LOG
                                            the API server's /openid/v1/jwks over HTTPS, to the
                                            bearer of TOKEN-FILE's token alone

Problems are printed one a line; the exit status is 1 when there are any.
"""
import json
import os
import re
import sys

import yaml

ETCD = "tollgate-etcd"
CONFLIST_KEY = "10-tollgate.conflist"
ALLOCATOR = "tollgate-allocator"
# a StatefulSet: each replica has a name of its own under the headless Service
# PEERS, the name a follower's redirect names and the serving certificate covers
ALLOC_KIND = "StatefulSet"
PEERS = "tollgate-allocator-peers"
# the allocator's serving certificate, and the agents' copy of its CA
ALLOC_TLS = "tollgate-allocator-tls"
ALLOC_CA_CM = "tollgate-allocator-ca"
ETCD_CLIENT = "tollgate-etcd-client"
# the audience of the agents' tokens (fixed by the allocator)
AUDIENCE = "tollgate-allocator"
AGENT_SA = "tollgate"
JWKS_URL = "https://kubernetes.default.svc/openid/v1/jwks"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# the allocator's policy: a ConfigMap of its own, one name (edited in place)
POLICY_CM = "tollgate-allocator-policy"
POLICY_KEY = "policy.json"
# what the conflist's budgets block may hold: how to reach the allocator
BUDGETS_KEYS = {"allocator", "reportSeconds", "leaseSeconds", "fallback", "fallbackAfterSeconds",
                "tokenFile", "caFile"}
# what a default kube-prometheus-stack install selects PodMonitors and rules by
RELEASE = "kube-prometheus-stack"
RUNBOOK_BASE = "https://github.com/tollgate-cni/tollgate/blob/main/docs/runbook.md"
RUNBOOK_ANNOTATION = "tollgate.io/runbook-base"
# the label each PodMonitor sets on its targets (and so on `up`)
UP_LABEL = "tollgate"
UP_VALUES = {"tollgate": "agent", ALLOCATOR: "allocator"}
BILLING_RULE = "namespace:tollgate_namespace_bytes:increase1h"
GENERATED_RE = r"tollgate-[a-z0-9]{10}"
# Grafana dashboards, relative to deploy/: the base's and components/budgets'
DASHBOARDS = ("dashboard.json", "components/budgets/dashboard.json")

_DOCS = {}


def docs(rendered):
    """every object of the rendering, in order"""
    if rendered not in _DOCS:
        fh = sys.stdin if rendered == "-" else open(rendered)
        # libyaml's loader where there is one: the tests read renderings many times
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        _DOCS[rendered] = [x for x in yaml.load_all(fh, Loader=loader) if x is not None]
    return _DOCS[rendered]


def load_named(rendered):
    """every object, by (kind, name)"""
    return {(x["kind"], x["metadata"]["name"]): x for x in docs(rendered)}


def agents_configmap(rendered):
    """the ConfigMap holding the conflist (the generated one)"""
    cms = [x for x in docs(rendered) if x["kind"] == "ConfigMap" and CONFLIST_KEY in (x.get("data") or {})]
    if len(cms) != 1:
        raise SystemExit("%d ConfigMaps hold %s, expected one" % (len(cms), CONFLIST_KEY))
    return cms[0]


def policy_configmap(rendered):
    """the allocator's policy's ConfigMap, or None"""
    return load_named(rendered).get(("ConfigMap", POLICY_CM))


def load_all(rendered):
    """by kind: the agent's objects (named tollgate), or the only one of its kind"""
    objs = {}
    for (kind, name), doc in load_named(rendered).items():
        if name == "tollgate" or kind not in objs:
            objs[kind] = doc
    objs["ConfigMap"] = agents_configmap(rendered)
    return objs


def agent_container(ds):
    cs = ds["spec"]["template"]["spec"]["containers"]
    return next(c for c in cs if c["name"] == "agent")


def allocator_container(dep):
    cs = dep["spec"]["template"]["spec"]["containers"]
    return next(c for c in cs if c["name"] == "allocator")


def flag(cmd, name):
    for w in cmd:
        if w.startswith(name + "="):
            return w.split("=", 1)[1]
    return None


def check_daemonset(d):
    objs = load_all(d)
    ds, cm = objs["DaemonSet"], objs["ConfigMap"]
    conflist = json.loads(cm["data"][CONFLIST_KEY])
    p = []
    tpl = ds["spec"]["template"]
    pod = tpl["spec"]
    sel = ds["spec"]["selector"]["matchLabels"]
    if any(tpl["metadata"]["labels"].get(k) != v for k, v in sel.items()):
        p.append("the selector does not match the template's labels")
    if pod.get("hostNetwork") is not True:
        p.append("hostNetwork is not true")
    if pod.get("priorityClassName") != "system-node-critical":
        p.append("priorityClassName is not system-node-critical")
    if (pod.get("nodeSelector") or {}).get("kubernetes.io/os") != "linux":
        p.append("nodeSelector kubernetes.io/os: linux missing")
    tol = pod.get("tolerations") or []
    if not any(t.get("operator") == "Exists" and "key" not in t and "effect" not in t for t in tol):
        p.append("no toleration of every taint (operator: Exists, no key, no effect)")
    if pod.get("automountServiceAccountToken") is not False:
        p.append("automountServiceAccountToken is not false (the agent never calls the API server)")
    if len(pod["containers"]) != 1:
        p.append("%d containers, expected the agent alone" % len(pod["containers"]))
    c = agent_container(ds)
    p += check_agent_credentials(d, ds, c, next(e for e in conflist["plugins"] if e["type"] == "tollgate"))
    sc = c.get("securityContext") or {}
    caps = sc.get("capabilities") or {}
    if caps.get("add") != ["NET_ADMIN"]:
        p.append("capabilities.add is %r, expected [NET_ADMIN]" % caps.get("add"))
    if caps.get("drop") != ["ALL"]:
        p.append("capabilities.drop is %r, expected [ALL]" % caps.get("drop"))
    if sc.get("privileged"):
        p.append("privileged")
    if sc.get("allowPrivilegeEscalation") is not False:
        p.append("allowPrivilegeEscalation is not false")
    if sc.get("readOnlyRootFilesystem") is not True:
        p.append("readOnlyRootFilesystem is not true")
    seccomp = (sc.get("seccompProfile") or (pod.get("securityContext") or {}).get("seccompProfile") or {})
    if seccomp.get("type") != "RuntimeDefault":
        p.append("seccompProfile is not RuntimeDefault")
    if pod.get("hostPID") or pod.get("hostIPC"):
        p.append("hostPID or hostIPC")
    # probes and the metrics port
    cmd = c["command"]
    listen = flag(cmd, "--listen") or ""
    port = int(listen.rsplit(":", 1)[1]) if ":" in listen else None
    if not listen.startswith("$(NODE_IP):"):
        p.append("--listen %r is not the node's address $(NODE_IP):PORT" % listen)
    env = {e["name"]: e for e in c.get("env", [])}
    if (env.get("NODE_IP", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            != "status.hostIP"):
        p.append("NODE_IP does not come from status.hostIP")
    # budget reports: the allocator's Service name resolved, and the Node's name
    if pod.get("hostNetwork") and pod.get("dnsPolicy") != "ClusterFirstWithHostNet":
        p.append("dnsPolicy is %r: on the host network only ClusterFirstWithHostNet resolves "
                 "budgets.allocator's Service name" % pod.get("dnsPolicy", "ClusterFirst"))
    node = flag(cmd, "--node-name") or ""
    m = re.fullmatch(r"\$\((\w+)\)", node)
    if not m or ((env.get(m.group(1)) or {}).get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath") != "spec.nodeName":
        p.append("--node-name %r is not $(VAR) with VAR from spec.nodeName (the downward API)" % node)
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        g = (c.get(probe) or {}).get("httpGet") or {}
        if g.get("path") != path:
            p.append("%s is not httpGet %s" % (probe, path))
        if g.get("port") != port:
            p.append("%s probes port %r, the agent listens on %r" % (probe, g.get("port"), port))
    ports = {pt.get("name"): pt.get("containerPort") for pt in c.get("ports", [])}
    if ports.get("metrics") != port:
        p.append("container port 'metrics' is %r, the agent listens on %r" % (ports.get("metrics"), port))
    res = c.get("resources") or {}
    for k in ("cpu", "memory"):
        if k not in (res.get("requests") or {}):
            p.append("no %s request" % k)
    if "memory" not in (res.get("limits") or {}):
        p.append("no memory limit")
    # volumes: what each host directory is mounted as
    vols = {v["name"]: v for v in pod["volumes"]}
    mounts = {}
    for m in c.get("volumeMounts", []):
        v = vols.get(m["name"])
        if v is None:
            p.append("mount %s names no volume" % m["name"])
            continue
        if "hostPath" in v:
            mounts[v["hostPath"]["path"]] = m
        elif "configMap" in v:
            mounts["configmap:" + v["configMap"]["name"]] = m

    def mount_of(host, why):
        m = mounts.get(host)
        if m is None:
            p.append("%s is not mounted (%s)" % (host, why))
        return m

    m = mount_of("/etc/cni/net.d", "the conflist is installed there")
    if m and flag(cmd, "--cni-conf-dir") != m["mountPath"]:
        p.append("--cni-conf-dir %r is not where /etc/cni/net.d is mounted (%s)"
                 % (flag(cmd, "--cni-conf-dir"), m["mountPath"]))
    if m and m.get("readOnly"):
        p.append("/etc/cni/net.d is mounted read-only")
    m = mount_of("/opt/cni/bin", "the plugin is installed there")
    if m and flag(cmd, "--cni-bin-dir") != m["mountPath"]:
        p.append("--cni-bin-dir %r is not where /opt/cni/bin is mounted (%s)"
                 % (flag(cmd, "--cni-bin-dir"), m["mountPath"]))
    # the plugin on the host and the agent in its container must share one store
    data_dir = next(e for e in conflist["plugins"] if e["type"] == "tollgate").get("dataDir", "/run/tollgate")
    m = mount_of(data_dir, "the conflist's dataDir: the plugin's store")
    if m and (m["mountPath"] != data_dir or m.get("readOnly")):
        p.append("dataDir %s is mounted at %s%s: the agent would not see the plugin's store"
                 % (data_dir, m["mountPath"], " read-only" if m.get("readOnly") else ""))
    m = mount_of("/var/run/netns", "gc tells a gone netns from an unseen one")
    if m and m.get("mountPropagation") != "HostToContainer":
        p.append("the netns directory is mounted without HostToContainer propagation")
    if m and m["mountPath"] != "/var/run/netns":
        p.append("the netns directory is mounted at %s, not where the runtime's paths point"
                 % m["mountPath"])
    m = mount_of("/", "the plugin's libraries are checked on the host")
    if m and flag(cmd, "--host-root") != m["mountPath"]:
        p.append("--host-root %r is not where the host's / is mounted (%s)"
                 % (flag(cmd, "--host-root"), m["mountPath"]))
    if m and not m.get("readOnly"):
        p.append("the host's / is mounted writable")
    m = mount_of("configmap:" + cm["metadata"]["name"], "the conflist")
    cfg = flag(cmd, "--config")
    if m and cfg != m["mountPath"].rstrip("/") + "/" + CONFLIST_KEY:
        p.append("--config %r is not the ConfigMap's %s under %s" % (cfg, CONFLIST_KEY, m["mountPath"]))
    for obj in (ds, cm):
        if obj["metadata"].get("namespace") != "kube-system":
            p.append("%s is not in kube-system" % obj["kind"])
    # a rollout (a new image, a new ConfigMap) goes node by node
    us = ds["spec"].get("updateStrategy") or {}
    ru = us.get("rollingUpdate") or {}
    mu = ru.get("maxUnavailable", 1)
    if us.get("type", "RollingUpdate") != "RollingUpdate":
        p.append("updateStrategy is %r: a new ConfigMap would reach no running agent" % us.get("type"))
    elif isinstance(mu, str) and re.fullmatch(r"\d+%", mu):
        if not 0 < int(mu[:-1]) <= 25:
            p.append("maxUnavailable %s: a bad rollout would take more than a quarter of the nodes' agents" % mu)
    elif not (isinstance(mu, int) and mu >= 1):
        p.append("maxUnavailable %r is not a count >= 1 or a percentage" % mu)
    if ru.get("maxSurge", 0) not in (0, "0%"):
        p.append("maxSurge %r: a second agent on a node finds the hostNetwork port %r taken"
                 % (ru.get("maxSurge"), port))
    return p


def mounted_files(pod, c):
    """what the container's mounts put where: {path: (kind, source, key)} for every
    file of a Secret, ConfigMap or projected volume that names its items or is a
    token ("token", audience, "") ; {mountPath + "/": (kind, source, None)} for a
    whole Secret or ConfigMap"""
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    out = {}
    for m in c.get("volumeMounts", []):
        v = vols.get(m["name"], {})
        mp = m["mountPath"].rstrip("/") + "/"
        srcs = []
        if "projected" in v:
            srcs = v["projected"].get("sources") or []
        elif "secret" in v or "configMap" in v:
            srcs = [v]
        for src in srcs:
            if "serviceAccountToken" in src:
                t = src["serviceAccountToken"]
                out[mp + t.get("path", "")] = ("token", t.get("audience"), t.get("expirationSeconds", 3600),
                                               m.get("readOnly", False))
                continue
            for kind, name_key in (("secret", "secretName"), ("configMap", "name")):
                if kind not in src:
                    continue
                name = src[kind].get(name_key) or src[kind].get("name")
                items = src[kind].get("items")
                if items is None:
                    out[mp] = (kind, name, None, m.get("readOnly", False))
                else:
                    for it in items:
                        out[mp + it["path"]] = (kind, name, it["key"], m.get("readOnly", False))
    return out


def file_source(files, path):
    """(kind, name, key, readOnly) of the file PATH in mounted_files' map, or None"""
    if path in files:
        return files[path]
    for mp, src in files.items():
        if mp.endswith("/") and path.startswith(mp) and "/" not in path[len(mp):]:
            return (src[0], src[1], path[len(mp):], src[3])
    return None


def bindings_of(d, sa, ns):
    """the RoleBindings and ClusterRoleBindings naming ServiceAccount NS/SA: [(kind, name, role)]"""
    out = []
    for x in docs(d):
        if x["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        for sub in x.get("subjects") or []:
            if sub.get("kind") == "ServiceAccount" and sub.get("name") == sa and sub.get("namespace", ns) == ns:
                out.append((x["kind"], x["metadata"]["name"], (x.get("roleRef") or {}).get("name")))
    return out


def check_agent_credentials(d, ds, c, entry):
    """with a budgets block: the agents' ServiceAccount (tollgate, bound to nothing), the
    projected token of the allocator's audience where budgets.tokenFile points, the
    allocator's CA from a ConfigMap where budgets.caFile points, no Secret mounted (its
    node could read it whole); without one, none of it"""
    p = []
    pod = ds["spec"]["template"]["spec"]
    ns = ds["metadata"].get("namespace")
    budgets = entry.get("budgets")
    sa = pod.get("serviceAccountName", "default")
    files = mounted_files(pod, c)
    tokens = {k: v for k, v in files.items() if v[0] == "token"}
    for v in pod.get("volumes", []):
        secs = [v["secret"].get("secretName")] if "secret" in v else \
            [x["secret"].get("name") for x in (v.get("projected") or {}).get("sources") or [] if "secret" in x]
        for name in secs:
            p.append("the DaemonSet mounts the Secret %s: every node's kubelet could read it whole" % name)
    if budgets is None:
        if sa != "default":
            p.append("a ServiceAccount of its own (%s) without a budgets block: nothing needs it" % sa)
        if tokens:
            p.append("a service-account token mounted without a budgets block: nothing reads it")
        return p
    if sa != AGENT_SA:
        p.append("serviceAccountName is %r, not %s: the token would name another identity" % (sa, AGENT_SA))
    sao = load_named(d).get(("ServiceAccount", sa))
    if sao is None or sao["metadata"].get("namespace") != ns:
        p.append("no ServiceAccount %s in %s: kubelet cannot issue the agents' token" % (sa, ns))
    elif sao.get("automountServiceAccountToken") is not False:
        p.append("the ServiceAccount %s automounts an API token" % sa)
    for kind, name, role in bindings_of(d, sa, ns):
        p.append("%s %s binds the agents' ServiceAccount to %s: their token is the allocator's alone"
                 % (kind, name, role))
    url, tf, cf = budgets.get("allocator") or "", budgets.get("tokenFile"), budgets.get("caFile")
    if not url.startswith("https://"):
        p.append("budgets.allocator %r is not https: the agent could not tell the allocator from a pod" % url)
    if not tf:
        p.append("no budgets.tokenFile: the allocator refuses every report")
    else:
        t = tokens.get(tf)
        if t is None:
            p.append("budgets.tokenFile %r is no projected serviceAccountToken of the agent's mounts (%s)"
                     % (tf, ", ".join(sorted(tokens)) or "none"))
        else:
            if t[1] != AUDIENCE:
                p.append("the token's audience is %r, not %s: the allocator refuses any other, and the API "
                         "server's own would make it an API credential" % (t[1], AUDIENCE))
            if not 600 <= t[2] <= 3600:
                p.append("the token lives %rs: kubelet's bounds are 600 s up, and a stolen one should "
                         "not outlive an hour" % t[2])
            if not t[3]:
                p.append("the token's volume is mounted writable")
    if not cf:
        p.append("no budgets.caFile: the agent could not verify the allocator")
    else:
        src = file_source(files, cf)
        if src is None:
            p.append("budgets.caFile %r is in none of the agent's mounts" % cf)
        elif src[0] != "configMap" or src[1] != ALLOC_CA_CM or src[2] != "ca.crt":
            p.append("budgets.caFile %r is %s %s's %s, not the ConfigMap %s's ca.crt" % (cf, src[0], src[1], src[2],
                                                                                      ALLOC_CA_CM))
    return p


def check_allocator(d):
    named = load_named(d)
    dep = named.get((ALLOC_KIND, ALLOCATOR))
    svc = named.get(("Service", ALLOCATOR))
    cm = load_all(d)["ConfigMap"]
    p = []
    if dep is None or svc is None:
        return ["no %s and Service %s" % (ALLOC_KIND, ALLOCATOR)]
    for obj in (dep, svc):
        if obj["metadata"].get("namespace") != "kube-system":
            p.append("%s %s is not in kube-system" % (obj["kind"], ALLOCATOR))
    spec = dep["spec"]
    cmd = allocator_container(dep)["command"]
    if spec.get("replicas", 1) < 3:
        p.append("replicas is %r: three, so that one lost still leaves a choice" % spec.get("replicas"))
    if spec.get("replicas", 1) > 1 and not (flag(cmd, "--etcd") and flag(cmd, "--advertise")):
        p.append("replicas without --etcd and --advertise: each would grant the whole budget")
    if (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") != "RollingUpdate":
        p.append("updateStrategy is not RollingUpdate: a new image would reach no replica")
    if spec.get("podManagementPolicy") != "Parallel":
        p.append("podManagementPolicy is not Parallel: replica N waits for N-1 to be ready")
    anti = (((spec["template"]["spec"].get("affinity") or {}).get("podAntiAffinity") or {})
            .get("requiredDuringSchedulingIgnoredDuringExecution") or [])
    if not any(t.get("topologyKey") == "kubernetes.io/hostname" and
               t.get("labelSelector", {}).get("matchLabels") == spec["selector"]["matchLabels"]
               for t in anti):
        p.append("no required anti-affinity on kubernetes.io/hostname: two replicas could share a node")
    pdb = named.get(("PodDisruptionBudget", ALLOCATOR))
    if pdb is None or pdb["spec"].get("selector", {}).get("matchLabels") != spec["selector"]["matchLabels"]:
        p.append("no PodDisruptionBudget %s selecting its pods" % ALLOCATOR)
    elif pdb["spec"].get("maxUnavailable") != 1:
        p.append("the PodDisruptionBudget lets %r go at once" % pdb["spec"].get("maxUnavailable"))
    adv = flag(cmd, "--advertise") or ""
    env = {e["name"]: e for e in allocator_container(dep).get("env", [])}
    ns = dep["metadata"].get("namespace")
    m = re.fullmatch(r"https://\$\((\w+)\)\.([a-z0-9-]+)\.([a-z0-9-]+)\.svc:(\d+)", adv)
    if not m or ((env.get(m.group(1)) or {}).get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath") != "metadata.name":
        p.append("--advertise %r is not https://$(VAR).SERVICE.NAMESPACE.svc:PORT with VAR the pod's name (the "
                 "replica's own name, which the serving certificate covers; a pod IP it cannot)" % adv)
    elif m.group(2) != spec.get("serviceName") or m.group(3) != ns:
        p.append("--advertise names %s.%s, the StatefulSet's pods are named under %s.%s"
                 % (m.group(2), m.group(3), spec.get("serviceName"), ns))
    peers = named.get(("Service", spec.get("serviceName") or ""))
    if peers is None or peers["spec"].get("clusterIP") != "None":
        p.append("serviceName %r is no headless Service: the replicas' names would not resolve"
                 % spec.get("serviceName"))
    else:
        if peers["spec"].get("publishNotReadyAddresses") is not True:
            p.append("%s: publishNotReadyAddresses is not true (a new leader is named before it is ready)"
                     % spec.get("serviceName"))
        if any(tpl_labels(dep).get(k) != v for k, v in (peers["spec"].get("selector") or {"": None}).items()):
            p.append("%s does not select the allocator's pods" % spec.get("serviceName"))
    tpl = spec["template"]
    pod = tpl["spec"]
    labels = tpl["metadata"]["labels"]
    if any(labels.get(k) != v for k, v in spec["selector"]["matchLabels"].items()):
        p.append("the selector does not match the template's labels")
    if pod.get("hostNetwork"):
        p.append("hostNetwork: the allocator needs none")
    if pod.get("automountServiceAccountToken") is not False:
        p.append("automountServiceAccountToken is not false (its one API token is the volume it names)")
    if len(pod["containers"]) != 1:
        p.append("%d containers, expected the allocator alone" % len(pod["containers"]))
    p += check_allocator_trust(d, dep)
    psc = pod.get("securityContext") or {}
    c = allocator_container(dep)
    sc = c.get("securityContext") or {}
    if not (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")):
        p.append("runAsNonRoot is not true")
    if (sc.get("runAsUser", psc.get("runAsUser")) or 0) == 0:
        p.append("runs as root")
    caps = sc.get("capabilities") or {}
    if caps.get("drop") != ["ALL"] or caps.get("add"):
        p.append("capabilities are %r, expected drop [ALL] and no add" % caps)
    if sc.get("privileged") or sc.get("allowPrivilegeEscalation") is not False:
        p.append("privileged, or allowPrivilegeEscalation is not false")
    if sc.get("readOnlyRootFilesystem") is not True:
        p.append("readOnlyRootFilesystem is not true")
    if (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        p.append("seccompProfile is not RuntimeDefault")
    if cmd[0] != ALLOCATOR:
        p.append("the command is not %s" % ALLOCATOR)
    listen = flag(cmd, "--listen") or ":9618"
    port = int(listen.rsplit(":", 1)[1])
    ports = {pt.get("name"): pt.get("containerPort") for pt in c.get("ports", [])}
    if ports.get("https") != port:
        p.append("container port 'https' is %r, the allocator listens on %r" % (ports.get("https"), port))
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        g = (c.get(probe) or {}).get("httpGet") or {}
        if g.get("path") != path or g.get("port") != port or g.get("scheme") != "HTTPS":
            p.append("%s is not httpGet %s on port %r, scheme HTTPS (it serves nothing else)" % (probe, path, port))
    res = c.get("resources") or {}
    if "cpu" not in (res.get("requests") or {}) or "memory" not in (res.get("limits") or {}):
        p.append("no cpu request or memory limit")
    # its policy: a ConfigMap of its own, mounted as a directory where --policy points
    pol, polp = check_policy(d, dep)
    p += polp
    if flag(cmd, "--config") is not None:
        p.append("--config %r: the allocator reads its policy (--policy), not the agents' conflist"
                 % flag(cmd, "--config"))
    vols = {v["name"]: v for v in pod["volumes"]}
    for v in vols.values():
        if (v.get("configMap") or {}).get("name") == cm["metadata"]["name"]:
            p.append("the allocator mounts the agents' ConfigMap %s: a conflist edit would roll it, "
                     "and it reads nothing there" % cm["metadata"]["name"])
    # the Service: where budgets.allocator points
    if any(labels.get(k) != v for k, v in (svc["spec"].get("selector") or {}).items()) or \
            not svc["spec"].get("selector"):
        p.append("the Service's selector does not match the allocator's pods")
    sp = svc["spec"].get("ports") or []
    if len(sp) != 1 or sp[0].get("targetPort") not in ("https", port):
        p.append("the Service's port does not target the allocator's")
    conflist = json.loads(cm["data"][CONFLIST_KEY])
    entry = next(e for e in conflist["plugins"] if e["type"] == "tollgate")
    budgets = entry.get("budgets") or {}
    want = "https://%s.%s.svc:%d" % (ALLOCATOR, svc["metadata"]["namespace"], sp[0]["port"] if sp else 0)
    got = budgets.get("allocator")
    if got != want:
        p.append("the ConfigMap's budgets.allocator is %r, the Service is %s" % (got, want))
    extra = sorted(set(budgets) - BUDGETS_KEYS)
    if extra:
        p.append("the conflist's budgets block holds %s: budgets are the allocator's policy (%s), "
                 "the block only how to reach it" % (", ".join(extra), POLICY_CM))
    if pol is not None:
        # the period the allocator assumes is the nodes' own; its lease one they take
        if pol.get("reportSeconds", 1) != budgets.get("reportSeconds", 1):
            p.append("the policy's reportSeconds %r is not the conflist's budgets.reportSeconds %r"
                     % (pol.get("reportSeconds", 1), budgets.get("reportSeconds", 1)))
        if pol.get("leaseSeconds", 10) > budgets.get("leaseSeconds", 10):
            p.append("the policy's leaseSeconds %r is longer than the conflist's budgets.leaseSeconds %r "
                     "(the longest lease a node takes)" % (pol.get("leaseSeconds", 10), budgets.get("leaseSeconds", 10)))
    return p


def tpl_labels(w):
    return w["spec"]["template"]["metadata"].get("labels") or {}


def check_allocator_trust(d, dep):
    """HTTPS with the Secret ALLOC_TLS's certificate (a directory mount: renewals reach
    it); the reports' tokens checked against the API server's JWKS, read with the pod's
    own token (a projected volume: a token and kube-root-ca.crt) by a ServiceAccount
    bound to the issuer's discovery alone, and an issuer; etcd over https with the
    client certificate of the Secret ETCD_CLIENT; never --insecure-no-auth"""
    p = []
    pod = dep["spec"]["template"]["spec"]
    c = allocator_container(dep)
    cmd = c["command"] + c.get("args", [])
    ns = dep["metadata"].get("namespace")
    files = mounted_files(pod, c)
    if any(w.split("=", 1)[0] == "--insecure-no-auth" for w in cmd):
        p.append("--insecure-no-auth: every pod could report for any node")

    def in_secret(f, secret, key):
        path = flag(cmd, f)
        src = file_source(files, path or "")
        if path is None:
            p.append("no %s" % f)
        elif src is None or src[:3] != ("secret", secret, key):
            p.append("%s %r is not %s in the Secret %s's mount (%s)" % (f, path, key, secret, src))
    in_secret("--tls-cert", ALLOC_TLS, "tls.crt")
    in_secret("--tls-key", ALLOC_TLS, "tls.key")
    for m in c.get("volumeMounts", []):
        if m.get("subPath") or m.get("subPathExpr"):
            p.append("%s is mounted with subPath: kubelet never updates it (a renewed certificate, an "
                     "edited policy would wait for a restart)" % m["mountPath"])
    # the tokens' keys and issuer
    jwks = flag(cmd, "--jwks")
    if jwks is None:
        p.append("no --jwks: the allocator would take reports unauthenticated (or refuse to start)")
    elif jwks != JWKS_URL:
        if jwks.startswith("/") and file_source(files, jwks) is None:
            p.append("--jwks %r is in none of the allocator's mounts" % jwks)
        elif not jwks.startswith("/"):
            p.append("--jwks is %r, not the API server's %s" % (jwks, JWKS_URL))
    if jwks == JWKS_URL:
        tok = files.get(flag(cmd, "--jwks-token") or "")
        if tok is None or tok[0] != "token":
            p.append("--jwks-token %r is no projected serviceAccountToken of the pod" % flag(cmd, "--jwks-token"))
        elif tok[1] not in (None, ""):
            p.append("--jwks-token's audience is %r: the API server takes its own alone" % tok[1])
        ca = file_source(files, flag(cmd, "--jwks-ca") or "")
        if ca is None or ca[:3] != ("configMap", "kube-root-ca.crt", "ca.crt"):
            p.append("--jwks-ca %r is not kube-root-ca.crt's ca.crt (the API server's CA)" % flag(cmd, "--jwks-ca"))
        sa = pod.get("serviceAccountName", "default")
        sao = load_named(d).get(("ServiceAccount", sa))
        if sa == "default" or sao is None or sao["metadata"].get("namespace") != ns:
            p.append("serviceAccountName %r is not a ServiceAccount of the allocator's own in %s" % (sa, ns))
        roles = sorted(r for _, _, r in bindings_of(d, sa, ns))
        if roles != ["system:service-account-issuer-discovery"]:
            p.append("the allocator's ServiceAccount is bound to %r: the issuer's discovery alone" % roles)
    # the agents' account: the DaemonSet's (the allocator's default is kube-system:tollgate)
    ds = load_named(d).get(("DaemonSet", "tollgate"))
    if ds is not None and flag(cmd, "--insecure-no-auth") is None:
        want = "%s:%s" % (ds["metadata"].get("namespace"),
                          ds["spec"]["template"]["spec"].get("serviceAccountName", "default"))
        got = flag(cmd, "--agent-account") or "kube-system:" + AGENT_SA
        if got != want:
            p.append("--agent-account is %s, the agents' ServiceAccount is %s: every report would be refused"
                     % (got, want))
    iss = flag(cmd, "--issuer")
    if iss is None:
        p.append("no --issuer: the default is kubeadm's, say the cluster's")
    else:
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        m = re.fullmatch(r"\$\((\w+)\)", iss)
        val = env.get(m.group(1)) if m else iss
        if not (val or "").startswith("https://"):
            p.append("--issuer %r is %r, not an https URL" % (iss, val))
    # etcd: https, the client certificate
    etcd = flag(cmd, "--etcd")
    if etcd is not None:
        if not all(u.startswith("https://") for u in etcd.split(",")):
            p.append("--etcd %r is not https: whoever reaches etcd could write the election key" % etcd)
        in_secret("--etcd-ca", ETCD_CLIENT, "ca.crt")
        in_secret("--etcd-cert", ETCD_CLIENT, "tls.crt")
        in_secret("--etcd-key", ETCD_CLIENT, "tls.key")
    return p


RATE_RE = r"[0-9]+(\.[0-9]+)?[kKMGTP]?"


def check_policy(d, dep):
    """the allocator's policy: the ConfigMap POLICY_CM (that name: edited in place, so
    not generated with a hash suffix, and not immutable), policy.json in it of the
    policy file's shape; mounted as a directory (no subPath: kubelet updates only a
    directory mount when the ConfigMap changes), read-only, --policy the file in it.
    Returns (the policy, or None; problems)"""
    p = []
    cm = policy_configmap(d)
    if cm is None:
        gen = [x["metadata"]["name"] for x in docs(d) if x["kind"] == "ConfigMap"
               and POLICY_KEY in (x.get("data") or {})]
        return None, ["no ConfigMap %s%s" % (POLICY_CM, " (but %s: a hash suffix, so an edit is a new "
                                                       "ConfigMap and a rollout)" % ", ".join(gen) if gen else "")]
    if cm["metadata"].get("namespace") != dep["metadata"].get("namespace"):
        p.append("the ConfigMap %s is not in the allocator's namespace" % POLICY_CM)
    if cm.get("immutable"):
        p.append("the ConfigMap %s is immutable: a policy edit could never reach the running allocator"
                 % POLICY_CM)
    pol = None
    try:
        pol = json.loads((cm.get("data") or {})[POLICY_KEY])
    except (KeyError, ValueError) as e:
        p.append("the ConfigMap %s has no %s that parses: %s" % (POLICY_CM, POLICY_KEY, e))
    if pol is not None:
        p += policy_shape(pol)
    c = allocator_container(dep)
    cmd = c["command"] + c.get("args", [])
    path = flag(cmd, "--policy")
    vols = {v["name"]: v for v in dep["spec"]["template"]["spec"].get("volumes", [])}
    mounts = [m for m in c.get("volumeMounts", [])
              if (vols.get(m["name"], {}).get("configMap") or {}).get("name") == POLICY_CM]
    if not mounts:
        p.append("the ConfigMap %s is not mounted in the allocator's container" % POLICY_CM)
    for m in mounts:
        if m.get("subPath") or m.get("subPathExpr"):
            p.append("%s is mounted with subPath at %s: kubelet never updates a subPath mount, so a "
                     "policy edit would wait for the pod's restart" % (POLICY_CM, m["mountPath"]))
        if not m.get("readOnly"):
            p.append("%s is mounted writable" % POLICY_CM)
        items = vols[m["name"]]["configMap"].get("items")
        if items is not None and {"key": POLICY_KEY, "path": POLICY_KEY} not in items:
            p.append("the volume's items do not put %s at %s" % (POLICY_KEY, POLICY_KEY))
    if path is None:
        p.append("no --policy: the allocator has no policy to grant from")
    elif mounts and not any(path == m["mountPath"].rstrip("/") + "/" + POLICY_KEY for m in mounts):
        p.append("--policy %r is not %s in the directory %s is mounted at (%s)"
                 % (path, POLICY_KEY, POLICY_CM, ", ".join(m["mountPath"] for m in mounts)))
    return pol, p


def policy_shape(pol):
    """what the allocator takes (docs/budgets.md): the same keys, in range; the allocator
    itself is the judge (tests/integration/test_deploy.sh runs it on the overlay's)"""
    p = []
    if not isinstance(pol, dict):
        return ["the policy is not a JSON object"]
    extra = sorted(set(pol) - {"version", "reportSeconds", "leaseSeconds", "namespaces"})
    if extra:
        p.append("the policy has keys the allocator refuses: %s" % ", ".join(extra))
    if pol.get("version") != 1:
        p.append("the policy's version is %r, not 1" % pol.get("version"))
    rs, ls = pol.get("reportSeconds", 1), pol.get("leaseSeconds", 10)
    if not (isinstance(rs, int) and 1 <= rs <= 60):
        p.append("reportSeconds %r is not 1 to 60" % rs)
    elif not (isinstance(ls, int) and 2 <= ls <= 3600 and ls >= 2 * rs):
        p.append("leaseSeconds %r is not 2 to 3600 and at least twice reportSeconds" % ls)
    ns = pol.get("namespaces")
    if not isinstance(ns, dict) or not ns:
        p.append("the policy budgets no namespace (namespaces is %r)" % ns)
        return p
    for name, b in ns.items():
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", name):
            p.append("namespace %r is not a DNS label" % name)
        dirs = {"internetEgress", "internetIngress"}
        if not isinstance(b, dict) or not b or set(b) - dirs:
            p.append("namespace %s: %r, expected {\"internetEgress\": RATE, \"internetIngress\": "
                     "RATE} (either or both) alone" % (name, b))
            continue
        for k, r in sorted(b.items()):
            if not (isinstance(r, int) and r > 0 or isinstance(r, str) and re.fullmatch(RATE_RE, r)):
                p.append("namespace %s: %s %r is not a rate" % (name, k, r))
    return p


def etcd_container(sts):
    return next(c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "etcd")


def check_etcd(d):
    """components/etcd: a 3-member cluster the allocator's --etcd names"""
    named = load_named(d)
    sts, svc = named.get(("StatefulSet", ETCD)), named.get(("Service", ETCD))
    dep = named.get((ALLOC_KIND, ALLOCATOR))
    p = []
    if sts is None or svc is None:
        return ["no StatefulSet and Service %s" % ETCD]
    ns = sts["metadata"]["namespace"]
    if sts["spec"].get("replicas") != 3:
        p.append("%r members: three keep a quorum through one's loss" % sts["spec"].get("replicas"))
    if sts["spec"].get("serviceName") != ETCD or svc["spec"].get("clusterIP") != "None":
        p.append("the members' names need a headless Service %s as serviceName" % ETCD)
    if svc["spec"].get("publishNotReadyAddresses") is not True:
        p.append("publishNotReadyAddresses is not true: members could not find each other to start")
    if sts["spec"].get("podManagementPolicy") != "Parallel":
        p.append("podManagementPolicy is not Parallel: the first member waits for a quorum alone")
    anti = (((sts["spec"]["template"]["spec"].get("affinity") or {}).get("podAntiAffinity") or {})
            .get("requiredDuringSchedulingIgnoredDuringExecution") or [])
    if not any(t.get("topologyKey") == "kubernetes.io/hostname" for t in anti):
        p.append("members may share a node")
    pdb = named.get(("PodDisruptionBudget", ETCD))
    if pdb is None or pdb["spec"].get("minAvailable") != 2:
        p.append("no PodDisruptionBudget keeping two members (the quorum)")
    ec = etcd_container(sts)
    cmd = ec["command"]
    dom = "%s.%s.svc" % (ETCD, ns)
    want_peers = ",".join("%s-%d=https://%s-%d.%s:2380" % (ETCD, i, ETCD, i, dom) for i in range(3))
    if flag(cmd, "--initial-cluster") != want_peers:
        p.append("--initial-cluster is %r, the members are %s" % (flag(cmd, "--initial-cluster"), want_peers))
    if flag(cmd, "--advertise-client-urls") != "https://$(POD_NAME).%s:2379" % dom:
        p.append("--advertise-client-urls is not the member's own name, https")
    for f in ("--listen-client-urls", "--listen-peer-urls", "--initial-advertise-peer-urls"):
        if not all(u.startswith("https://") for u in (flag(cmd, f) or "").split(",")):
            p.append("%s %r is not https" % (f, flag(cmd, f)))
    # TLS with client certificates, clients and peers, the files in Secrets
    for b in ("--client-cert-auth", "--peer-client-cert-auth"):
        if b not in cmd and flag(cmd, b) != "true":
            p.append("no %s: anyone reaching the port could write the election key" % b)
    files = mounted_files(sts["spec"]["template"]["spec"], ec)
    for f in ("--trusted-ca-file", "--cert-file", "--key-file", "--peer-trusted-ca-file",
              "--peer-cert-file", "--peer-key-file"):
        src = file_source(files, flag(cmd, f) or "")
        if src is None or src[0] != "secret":
            p.append("%s %r is in no mounted Secret" % (f, flag(cmd, f)))
    # the probes: plain HTTP on the metrics port (kubelet has no client certificate)
    murl = flag(cmd, "--listen-metrics-urls") or ""
    mport = int(murl.rsplit(":", 1)[1]) if re.fullmatch(r"http://[^/]+:\d+", murl) else None
    for probe in ("readinessProbe", "livenessProbe"):
        g = (ec.get(probe) or {}).get("httpGet") or {}
        if g.get("path") != "/health" or g.get("port") != mport or g.get("scheme", "HTTP") != "HTTP":
            p.append("%s is not httpGet /health on --listen-metrics-urls' port %r: the client port wants "
                     "a certificate kubelet does not have" % (probe, mport))
    mounts = {m["mountPath"] for m in etcd_container(sts).get("volumeMounts", [])}
    if flag(cmd, "--data-dir") not in mounts:
        p.append("--data-dir is not on the member's volume")
    if dep is not None:
        urls = (flag(allocator_container(dep)["command"], "--etcd") or "").split(",")
        want = ["https://%s-%d.%s:2379" % (ETCD, i, dom) for i in range(3)]
        if urls != want:
            p.append("the allocator's --etcd is %r, the members are %s" % (urls, want))
    netpol = named.get(("NetworkPolicy", ETCD))
    if netpol is None or not any(
            (f.get("podSelector") or {}).get("matchLabels") == dep["spec"]["selector"]["matchLabels"]
            for r in netpol["spec"].get("ingress", []) for f in r.get("from", [])):
        p.append("no NetworkPolicy letting the allocator (and no one else) be etcd's client")
    return p


def check_etcd_tls(d, base):
    """components/etcd-tls over the base: https, its certificates under a Secret's mount,
    every other flag and mount the base's; no etcd of Tollgate's own"""
    named, bnamed = load_named(d), load_named(base)
    dep, bdep = named.get((ALLOC_KIND, ALLOCATOR)), bnamed.get((ALLOC_KIND, ALLOCATOR))
    if dep is None or bdep is None:
        return ["no %s %s in both renderings" % (ALLOC_KIND, ALLOCATOR)]
    p = []
    if ("StatefulSet", ETCD) in named:
        p.append("the StatefulSet %s is there too: the TLS component is for a cluster's own etcd" % ETCD)
    pc, bc = allocator_container(dep), allocator_container(bdep)
    pcmd, bcmd = pc["command"], bc["command"]
    if pcmd[:3] != bcmd[:3]:
        p.append("the command's first words are not the base's")
    if not all(u.startswith("https://") for u in (flag(pcmd, "--etcd") or "").split(",")):
        p.append("--etcd is not https")
    if flag(pcmd, "--etcd") == flag(bcmd, "--etcd"):
        p.append("--etcd is the base's (Tollgate's own members)")
    vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["mountPath"]: vols.get(m["name"], {}) for m in pc.get("volumeMounts", [])}
    for f in ("--etcd-ca", "--etcd-cert", "--etcd-key"):
        path = flag(pcmd, f) or ""
        if not any(path.startswith(mp.rstrip("/") + "/") and "secret" in v for mp, v in mounts.items()):
            p.append("%s %r is not in a mounted Secret" % (f, path))
    for w in ("--advertise", "--election-key", "--policy", "--listen"):
        if flag(pcmd, w) != flag(bcmd, w):
            p.append("%s differs from the base's" % w)
    # the patch adds to the pod; it takes nothing of the base's away
    for m in bc.get("volumeMounts", []):
        if m not in pc.get("volumeMounts", []):
            p.append("the base's mount %s is gone" % m["mountPath"])
    bvols = bdep["spec"]["template"]["spec"]["volumes"]
    for v in bvols:
        if v not in dep["spec"]["template"]["spec"]["volumes"]:
            p.append("the base's volume %s is gone" % v["name"])
    return p


def check_monitoring(d, release=RELEASE, runbook_base=RUNBOOK_BASE):
    objs = load_all(d)
    pm, pr, ds = objs["PodMonitor"], objs["PrometheusRule"], objs["DaemonSet"]
    p = []
    labels = ds["spec"]["template"]["metadata"]["labels"]
    if any(labels.get(k) != v for k, v in pm["spec"]["selector"]["matchLabels"].items()):
        p.append("the PodMonitor's selector does not match the agent's pods")
    if ds["metadata"]["namespace"] not in pm["spec"].get("namespaceSelector", {}).get("matchNames", []):
        p.append("the PodMonitor does not look in the DaemonSet's namespace")
    ports = {pt.get("name") for pt in agent_container(ds).get("ports", [])}
    for ep in pm["spec"]["podMetricsEndpoints"]:
        if ep.get("port") not in ports:
            p.append("the PodMonitor scrapes port %r, which the agent does not name" % ep.get("port"))
        if ep.get("honorLabels") is not True:
            p.append("honorLabels is not true (the namespace label is Tollgate's)")
        rl = ep.get("relabelings") or []
        if not any(r.get("sourceLabels") == ["__meta_kubernetes_pod_node_name"]
                   and r.get("targetLabel") == "node" for r in rl):
            p.append("no relabeling puts the node's name in 'node'")
        dropped = [r.get("regex", "") for r in rl if r.get("action") == "labeldrop"]
        for lbl in ("namespace", "pod"):
            if not any(re.fullmatch(rx, lbl) for rx in dropped):
                p.append("the target's %r is not dropped: series without Tollgate's own would get "
                         "the agent's" % lbl)
    named = load_named(d)
    apm, dep = named.get(("PodMonitor", ALLOCATOR)), named.get((ALLOC_KIND, ALLOCATOR))
    if dep is None:
        if apm is not None:
            p.append("a PodMonitor %s without the allocator's %s" % (ALLOCATOR, ALLOC_KIND))
    elif apm is None:
        p.append("no PodMonitor %s for the allocator's %s" % (ALLOCATOR, ALLOC_KIND))
    else:
        alabels = dep["spec"]["template"]["metadata"]["labels"]
        if any(alabels.get(k) != v for k, v in apm["spec"]["selector"]["matchLabels"].items()):
            p.append("the allocator's PodMonitor does not select its pods")
        if dep["metadata"]["namespace"] not in apm["spec"].get("namespaceSelector", {}).get("matchNames", []):
            p.append("the allocator's PodMonitor does not look in its namespace")
        aports = {pt.get("name") for pt in allocator_container(dep).get("ports", [])}
        for ep in apm["spec"]["podMetricsEndpoints"]:
            if ep.get("port") not in aports:
                p.append("the allocator's PodMonitor scrapes port %r, which it does not name" % ep.get("port"))
            if ep.get("honorLabels") is not True:
                p.append("the allocator's PodMonitor: honorLabels is not true (namespace is the budget's)")
            dropped = [r.get("regex", "") for r in ep.get("relabelings") or [] if r.get("action") == "labeldrop"]
            for lbl in ("namespace", "pod"):
                if not any(re.fullmatch(rx, lbl) for rx in dropped):
                    p.append("the allocator's PodMonitor keeps the target's %r" % lbl)
            # https, verified with the serving certificate's CA by a name it covers
            if ep.get("scheme") != "https":
                p.append("the allocator's PodMonitor scrapes with scheme %r: it serves https alone"
                         % ep.get("scheme", "http"))
            tc = ep.get("tlsConfig") or {}
            ca = (tc.get("ca") or {}).get("secret") or {}
            if tc.get("insecureSkipVerify"):
                p.append("the allocator's PodMonitor skips verifying its certificate")
            if (ca.get("name"), ca.get("key")) != (ALLOC_TLS, "ca.crt"):
                p.append("the allocator's PodMonitor verifies with %r, not %s's ca.crt" % (ca, ALLOC_TLS))
            if tc.get("keySecret") or tc.get("cert"):
                p.append("the allocator's PodMonitor presents a client certificate (the operator would copy "
                         "a key into the Prometheus)")
            want_sn = "%s.%s.svc" % (ALLOCATOR, dep["metadata"].get("namespace"))
            if tc.get("serverName") != want_sn:
                p.append("the allocator's PodMonitor checks the name %r, not the Service's %s (the target is a "
                         "pod IP, which the certificate does not name)" % (tc.get("serverName"), want_sn))
    for g in pr["spec"]["groups"]:
        for r in g["rules"]:
            if "alert" in r:
                if r.get("labels", {}).get("severity") not in ("warning", "critical", "info"):
                    p.append("alert %s has no severity" % r["alert"])
                if not r.get("annotations", {}).get("summary"):
                    p.append("alert %s has no summary" % r["alert"])
    need = {"pool exhausted": "TollgatePoolExhausted", "sync stale": "TollgatePoolSyncStale",
            "collector down": "TollgateCollectorDown", "repairs": "TollgateRepairsHappening",
            "spoofing": "TollgateSpoofingSeen"}
    budgets = {"allocator down": "TollgateAllocatorDown",
               "nodes without a live grant": "TollgateBudgetNodesDegraded",
               "budget saturated": "TollgateBudgetSaturated"}
    if dep is not None:
        need.update(budgets)
    alerts = {r["alert"] for g in pr["spec"]["groups"] for r in g["rules"] if "alert" in r}
    for what, name in need.items():
        if name not in alerts:
            p.append("no %s alert (%s)" % (what, name))
    if dep is None:
        p += check_no_budgets(d)
    p += check_selector_labels(d, release)
    p += check_up_label(d)
    p += check_runbook_urls(d, runbook_base)
    p += check_billing(d)
    return p


BUDGET_METRIC_RE = r"\b(tollgate_allocator_\w+|tollgate_budget_\w+)"


def check_no_budgets(d, deploy=None):
    """a rendering without components/budgets: no allocator, no alert or rule reading
    the allocator's or the budgets' series, no budgets block; the base's dashboard
    (deploy/dashboard.json) reads none either"""
    p = []
    for x in docs(d):
        if x["metadata"]["name"].startswith(ALLOCATOR):
            p.append("%s/%s without components/budgets" % (x["kind"], x["metadata"]["name"]))
        elif x["kind"] == "ServiceAccount" or x["apiVersion"].startswith("cert-manager.io/"):
            p.append("%s/%s without components/budgets" % (x["kind"], x["metadata"]["name"]))
    for g in load_all(d)["PrometheusRule"]["spec"]["groups"]:
        for r in g["rules"]:
            m = re.search(BUDGET_METRIC_RE, str(r["expr"]))
            if m:
                p.append("%s reads %s without components/budgets" % (r.get("alert") or r.get("record"), m.group(1)))
    entry = next(e for e in json.loads(agents_configmap(d)["data"][CONFLIST_KEY])["plugins"]
                 if e["type"] == "tollgate")
    if "budgets" in entry:
        p.append("the conflist has a budgets block without components/budgets (no allocator answers it)")
    if deploy:
        with open(os.path.join(deploy, "dashboard.json")) as fh:
            m = re.search(BUDGET_METRIC_RE, fh.read())
        if m:
            p.append("deploy/dashboard.json reads %s (the budgets' rows are components/budgets' dashboard)" % m.group(1))
    return p


def check_selector_labels(d, release):
    """the label the cluster's Prometheus selects PodMonitors and rules by"""
    p = []
    objs = [x for x in docs(d) if x["kind"] in ("PodMonitor", "PrometheusRule")]
    if not objs:
        p.append("no PodMonitor or PrometheusRule")
    for x in objs:
        got = (x["metadata"].get("labels") or {}).get("release")
        if got != release:
            p.append("%s %s: label release is %r, not %r" % (x["kind"], x["metadata"]["name"], got, release))
    return p


def check_up_label(d):
    """each PodMonitor puts tollgate=<its part> on its targets, and only there (the page's
    samples are left as served); the rules select `up` by it, never by job"""
    p = []
    named = load_named(d)
    for name, value in UP_VALUES.items():
        pm = named.get(("PodMonitor", name))
        if pm is None:
            if name != ALLOCATOR or (ALLOC_KIND, ALLOCATOR) in named:
                p.append("no PodMonitor %s" % name)
            continue
        for ep in pm["spec"]["podMetricsEndpoints"]:
            if not any(r.get("targetLabel") == UP_LABEL and r.get("replacement") == value
                       and not r.get("sourceLabels") and r.get("action", "replace").lower() == "replace"
                       for r in ep.get("relabelings") or []):
                p.append("PodMonitor %s does not set %s=%r on its targets" % (name, UP_LABEL, value))
            if not any(r.get("action", "").lower() == "labeldrop" and re.fullmatch(r.get("regex", ""), UP_LABEL)
                       for r in ep.get("metricRelabelings") or []):
                p.append("PodMonitor %s leaves %s on the page's samples (it belongs on up alone)"
                         % (name, UP_LABEL))
    spec = load_all(d)["PrometheusRule"]["spec"]
    for g in spec["groups"]:
        for r in g["rules"]:
            what = r.get("alert") or r.get("record")
            e = str(r["expr"])
            if re.search(r"\bjob\s*(=|!=|=~|!~)", e):
                p.append("%s matches on job (an overlay's names change it): %s" % (what, " ".join(e.split())))
            for m in re.finditer(r"\bup\s*(\{[^}]*\})?", e):
                sel = m.group(1) or ""
                v = re.search(r'\b%s\s*=\s*"([^"]*)"' % UP_LABEL, sel)
                if not v or v.group(1) not in UP_VALUES.values():
                    p.append("%s reads up%s: not selected by %s=%s" % (what, sel, UP_LABEL,
                                                                         "|".join(sorted(UP_VALUES.values()))))
    return p


def check_runbook_urls(d, base):
    p = []
    pr = load_all(d)["PrometheusRule"]
    ann = (pr["metadata"].get("annotations") or {}).get(RUNBOOK_ANNOTATION)
    if ann != base:
        p.append("the PrometheusRule's %s is %r, not %r" % (RUNBOOK_ANNOTATION, ann, base))
    for g in pr["spec"]["groups"]:
        for r in g["rules"]:
            if "alert" not in r:
                continue
            want = "%s#%s" % (base, r["alert"].lower())
            got = (r.get("annotations") or {}).get("runbook_url")
            if got != want:
                p.append("alert %s: runbook_url is %r, not %r" % (r["alert"], got, want))
    return p


def check_runbook(d, path):
    """docs/runbook.md has a heading of each alert's name (GitHub's anchor: its name in lower case)"""
    if not os.path.exists(path):
        return ["%s does not exist: every alert's runbook_url points into it" % path]
    with open(path) as fh:
        headings = {m.group(1).strip() for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", fh.read(), re.M)}
    p = []
    for g in load_all(d)["PrometheusRule"]["spec"]["groups"]:
        for r in g["rules"]:
            if "alert" in r and r["alert"] not in headings:
                p.append("alert %s has no heading '%s' in %s" % (r["alert"], r["alert"], path))
    return p


def check_billing(d):
    """what bills read is hourly increases summed across nodes; no rule sums the raw
    counters across nodes (that sum drops at every scale-in and reboot)"""
    p = []
    rules = [r for g in load_all(d)["PrometheusRule"]["spec"]["groups"] for r in g["rules"] if "record" in r]
    bill = next((r for r in rules if r["record"] == BILLING_RULE), None)
    if bill is None:
        p.append("no recording rule %s" % BILLING_RULE)
    else:
        e = " ".join(str(bill["expr"]).split())
        m = re.fullmatch(r"sum by \(([^)]*)\) \(increase\(tollgate_namespace_bytes_total\[1h\]\)\)", e)
        if not m:
            p.append("%s is not sum by (...) (increase(tollgate_namespace_bytes_total[1h])): %s" % (BILLING_RULE, e))
        elif sorted(x.strip() for x in m.group(1).split(",")) != ["direction", "namespace", "traffic"]:
            p.append("%s sums by (%s), not by namespace, direction, traffic" % (BILLING_RULE, m.group(1)))
    for r in rules:
        e = " ".join(str(r["expr"]).split())
        if re.fullmatch(r"sum\s*(by\s*\([^)]*\)\s*)?\(\s*tollgate_namespace_bytes_total\s*\)", e):
            p.append("%s sums the raw counters across nodes: it drops when a node leaves or reboots" % r["record"])
    return p


def check_generated(d):
    """the agents' ConfigMap has a generated (hashed) name and the two workloads mount it"""
    cm = agents_configmap(d)
    name = cm["metadata"]["name"]
    p = []
    if not re.fullmatch(GENERATED_RE, name):
        p.append("the ConfigMap is named %r, not tollgate-<hash> (configMapGenerator)" % name)
    if cm.get("immutable") is not True:
        p.append("the ConfigMap is not immutable (every kubelet would watch it)")
    if cm["metadata"].get("namespace") != "kube-system":
        p.append("the ConfigMap is not in kube-system")
    named = load_named(d)
    dep = named.get((ALLOC_KIND, ALLOCATOR))
    # the agents mount the conflist; the allocator (components/budgets) its policy alone
    for kind, wname, want in (("DaemonSet", "tollgate", name), (ALLOC_KIND, ALLOCATOR, POLICY_CM)):
        w = named.get((kind, wname))
        if w is None:
            if kind == "DaemonSet":
                p.append("no %s %s" % (kind, wname))
            continue
        refs = [v["configMap"]["name"] for v in w["spec"]["template"]["spec"].get("volumes", [])
                if "configMap" in v]
        if refs != [want]:
            p.append("%s %s mounts ConfigMaps %r, not %s" % (kind, wname, refs, want))
    others = [x["metadata"]["name"] for x in docs(d) if x["kind"] == "ConfigMap" and x is not cm
              and not (dep is not None and x["metadata"]["name"] == POLICY_CM)]
    if others:
        p.append("other ConfigMaps: %s" % ", ".join(others))
    return name, p


GRAFANA_VARS = [(r"\$__rate_interval|\$\{__rate_interval\}", "5m"),
                (r"\$__range|\$\{__range\}", "1h"),
                (r"\$__interval|\$\{__interval\}", "1m"),
                (r"\$\{?[A-Za-z_][A-Za-z0-9_]*(:[a-z]+)?\}?", ".*")]


def dashboard_queries(deploy):
    """(exprs, metric names of the template variables' label_values())"""
    if not deploy:
        raise SystemExit("--deploy DIR is needed: the dashboard is DIR/dashboard.json")
    exprs, var_metrics = [], []
    for path in DASHBOARDS:
        with open(os.path.join(deploy, path)) as fh:
            dash = json.load(fh)
        dashboard_queries_of(dash, exprs, var_metrics)
    return exprs, var_metrics


def dashboard_queries_of(dash, exprs, var_metrics):

    def walk(panels):
        for pn in panels:
            for t in pn.get("targets", []):
                exprs.append(t["expr"])
            walk(pn.get("panels", []))

    walk(dash["panels"])
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"\s*label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*\w+\s*\)\s*", q)
        if m:
            var_metrics.append(m.group(1))
        else:
            exprs.append(q)


def grafana_subst(expr):
    for rx, val in GRAFANA_VARS:
        expr = re.sub(rx, val, expr)
    return expr


PROMQL_WORDS = {"sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk",
                "quantile", "count_values", "group", "by", "without", "on", "ignoring",
                "group_left", "group_right", "and", "or", "unless", "offset", "bool", "time",
                "vector", "scalar", "rate", "irate", "increase", "delta", "idelta", "round",
                "abs", "clamp_min", "clamp_max", "histogram_quantile", "label_replace",
                "sort", "sort_desc", "absent", "changes", "resets", "deriv", "predict_linear",
                "avg_over_time", "max_over_time", "min_over_time", "sum_over_time",
                "last_over_time", "timestamp", "atan2", "inf", "nan"}


def names_in(expr):
    # strings and label matchers/groupings hold label names and values, not metrics
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)
    e = re.sub(r"\{[^}]*\}", "", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r"\[[^\]]*\]", "", e)
    out = set()
    for tok in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        if tok in PROMQL_WORDS or re.fullmatch(r"\d+[smhdwy]", tok):
            continue
        out.add(tok)
    return out


def rule_exprs(d):
    spec = load_all(d)["PrometheusRule"]["spec"]
    recorded, exprs = set(), []
    for g in spec["groups"]:
        for r in g["rules"]:
            exprs.append(r["expr"])
            if "record" in r:
                recorded.add(r["record"])
    return recorded, exprs


def referenced(d, deploy):
    recorded, exprs = rule_exprs(d)
    dexprs, var_metrics = dashboard_queries(deploy)
    names = set(var_metrics)
    for e in exprs + [grafana_subst(x) for x in dexprs]:
        names |= names_in(e)
    return recorded, names


# ---- the certificates (components/cert-manager)

def dns_covers(names, host):
    """a certificate naming NAMES is valid for HOST (RFC 6125: a wildcard stands for
    one whole left-most label)"""
    for n in names:
        if n == host:
            return True
        if n.startswith("*.") and "." in host and host.split(".", 1)[1] == n[2:] and host.split(".", 1)[0]:
            return True
    return False


def certificates(d):
    """{secretName: Certificate}"""
    return {x["spec"]["secretName"]: x for x in docs(d)
            if x["kind"] == "Certificate" and x["apiVersion"].startswith("cert-manager.io/")}


def issuer_ca(d, cert):
    """the secret of the CA the Certificate's Issuer signs with (None: not a CA Issuer)"""
    ref = cert["spec"].get("issuerRef") or {}
    iss = load_named(d).get((ref.get("kind", "Issuer"), ref.get("name")))
    return ((iss or {}).get("spec") or {}).get("ca", {}).get("secretName")


def check_certificates(d):
    """every Secret the allocator and etcd mount is a Certificate's; the serving one names the
    Service (budgets.allocator) and any replica (--advertise) and no IP; two CAs, the
    allocator's signing its serving certificate alone; etcd's server certificate serves
    clientAuth too and names the members the allocator's --etcd names; namespaced
    Issuers; a renewal before each end"""
    p = []
    named = load_named(d)
    certs = certificates(d)
    dep, sts = named.get((ALLOC_KIND, ALLOCATOR)), named.get(("StatefulSet", ETCD))
    for w in (dep, sts):
        if w is None:
            continue
        for v in w["spec"]["template"]["spec"].get("volumes", []):
            sec = (v.get("secret") or {}).get("secretName")
            if sec and sec not in certs:
                p.append("%s mounts the Secret %s, which no Certificate issues" % (w["metadata"]["name"], sec))
    for sec, cert in certs.items():
        ref = cert["spec"].get("issuerRef") or {}
        if ref.get("kind", "Issuer") != "Issuer":
            p.append("Certificate %s is issued by a %s: an Issuer keeps the CA's key in %s"
                     % (cert["metadata"]["name"], ref.get("kind"), cert["metadata"].get("namespace")))
        if (ref.get("kind", "Issuer"), ref.get("name")) not in named:
            p.append("Certificate %s names the Issuer %s, which is not there" % (cert["metadata"]["name"], ref.get("name")))
        if not cert["spec"].get("renewBefore"):
            p.append("Certificate %s has no renewBefore" % cert["metadata"]["name"])
    srv = certs.get(ALLOC_TLS)
    if dep is None:
        return p
    if srv is None:
        return p + ["no Certificate for %s" % ALLOC_TLS]
    names = srv["spec"].get("dnsNames") or []
    c = allocator_container(dep)
    entry = next(e for e in json.loads(agents_configmap(d)["data"][CONFLIST_KEY])["plugins"] if e["type"] == "tollgate")
    host = re.sub(r"^https://([^:/]+).*", r"\1", (entry.get("budgets") or {}).get("allocator", ""))
    if not dns_covers(names, host):
        p.append("the serving certificate %r does not name %s (budgets.allocator)" % (names, host))
    adv = flag(c["command"], "--advertise") or ""
    for i in range(dep["spec"].get("replicas", 1)):
        h = re.sub(r"^https://([^:/]+).*", r"\1", adv.replace("$(POD_NAME)", "%s-%d" % (ALLOCATOR, i)))
        if not dns_covers(names, h):
            p.append("the serving certificate %r does not name replica %d (%s): an agent would refuse its "
                     "redirect" % (names, i, h))
    if srv["spec"].get("ipAddresses"):
        p.append("the serving certificate names IPs: a pod's address is not the allocator's")
    if "server auth" not in (srv["spec"].get("usages") or []):
        p.append("the serving certificate's usages lack server auth")
    ca = issuer_ca(d, srv)
    if ca is None or not (certs.get(ca) or {}).get("spec", {}).get("isCA"):
        p.append("the serving certificate's Issuer is not a CA Issuer of a Certificate of the rendering")
    others = sorted(s for s, x in certs.items() if s != ALLOC_TLS and issuer_ca(d, x) == ca)
    if ca and others:
        p.append("the allocator's CA (%s) also signs %s: an agent would take those for the allocator"
                 % (ca, ", ".join(others)))
    if sts is not None:
        ec = etcd_container(sts)
        files = mounted_files(sts["spec"]["template"]["spec"], ec)
        cmd = ec["command"]
        src = file_source(files, flag(cmd, "--cert-file") or "")
        es = certs.get(src[1]) if src else None
        if es is None:
            p.append("etcd's --cert-file is no Certificate's")
        else:
            if not {"server auth", "client auth"} <= set(es["spec"].get("usages") or []):
                p.append("etcd's server certificate is not server auth and client auth (its JSON gateway is a "
                         "client of its own gRPC server with it)")
            for u in (flag(c["command"], "--etcd") or "").split(","):
                h = re.sub(r"^https://([^:/]+).*", r"\1", u)
                if not dns_covers(es["spec"].get("dnsNames") or [], h):
                    p.append("etcd's server certificate does not name %s (the allocator's --etcd)" % h)
        cl = certs.get(ETCD_CLIENT)
        if cl is None or "client auth" not in (cl["spec"].get("usages") or []):
            p.append("no client-auth Certificate for %s" % ETCD_CLIENT)
        elif es is not None and issuer_ca(d, cl) != issuer_ca(d, es):
            p.append("the allocator's client certificate and etcd's are of two CAs: etcd would refuse it")
    return p


def cert_spec(d, secret):
    """what to mint for SECRET: the Certificate's commonName, dnsNames, ipAddresses, usages"""
    cert = certificates(d).get(secret)
    if cert is None:
        raise SystemExit("no Certificate for %s in %s" % (secret, d))
    sp = cert["spec"]
    return {k: sp.get(k) for k in ("commonName", "dnsNames", "ipAddresses", "usages", "isCA")}


# ---- the API server's JWKS endpoint (the tokens: sa_token.py)

def api_serve(addr, cert, key, token_file, jwks, log):
    """the API server's /openid/v1/jwks over HTTPS (CERT, KEY) at ADDR:PORT, to a client
    whose bearer token is TOKEN_FILE's (re-read each time); 401 to any other, 404 for
    another path. "# serving" in LOG, then a line a request: METHOD PATH STATUS"""
    import http.server
    import ssl
    host, port = addr.rsplit(":", 1)
    out = open(log, "a", buffering=1)

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            with open(token_file) as fh:
                want = "Bearer " + fh.read().strip()
            if self.headers.get("Authorization") != want:
                code, body = 401, b'{"kind":"Status","code":401}'
            elif self.path != "/openid/v1/jwks":
                code, body = 404, b'{"kind":"Status","code":404}'
            else:
                with open(jwks, "rb") as fh:
                    code, body = 200, fh.read()
            self.send_response(code)
            self.send_header("Content-Type", "application/jwk-set+json" if code == 200 else "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            out.write("GET %s %d\n" % (self.path, code))

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer((host, int(port)), H)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    out.write("# serving\n")
    srv.serve_forever()


# ---- what kubelet gives a container (tests/integration/test_deploy.sh runs them so)

def workload(d, ref):
    kind, name = ref.split("/", 1)
    w = load_named(d).get((kind, name))
    if w is None:
        raise SystemExit("no %s in %s" % (ref, d))
    return w


def expand(s, env):
    """Kubernetes' $(VAR) expansion: a defined VAR is replaced, $$ is a literal $,
    anything else is left as written"""
    out, i = [], 0
    while i < len(s):
        if s.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        m = re.match(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", s[i:])
        if m and m.group(1) in env:
            out.append(env[m.group(1)])
            i += m.end()
            continue
        out.append(s[i])
        i += 1
    return "".join(out)


def container_env(c, fields):
    """the container's environment as kubelet sets it: values (expanded against
    the variables before them) and fieldRefs from FIELDS (path -> value)"""
    env = {}
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = expand(e["value"], env)
            continue
        ref = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if ref is None:
            raise SystemExit("env %s: only value and fieldRef are known here" % e["name"])
        if ref not in fields:
            raise SystemExit("env %s: fieldRef %s has no value (--field %s=VALUE)" % (e["name"], ref, ref))
        env[e["name"]] = fields[ref]
    return env


def kubelet_command(d, ref, container, fields):
    """the container's command and args as kubelet runs them, one word a line;
    then `--` and the environment, NAME=VALUE a line"""
    w = workload(d, ref)
    c = next(x for x in w["spec"]["template"]["spec"]["containers"] if x["name"] == container)
    env = container_env(c, fields)
    words = [expand(x, env) for x in c.get("command", []) + c.get("args", [])]
    return words, env


def kubelet_resolv(d, ref, namespace, cluster_dns, node_resolv, domain="cluster.local"):
    """/etc/resolv.conf as kubelet writes it for the pod's dnsPolicy: ClusterFirst
    (off the host network) and ClusterFirstWithHostNet: the cluster DNS, the
    namespace's search domains then the node's, ndots:5; ClusterFirst on the host
    network, and Default: the node's own"""
    pod = workload(d, ref)["spec"]["template"]["spec"]
    policy = pod.get("dnsPolicy", "ClusterFirst")
    with open(node_resolv) as fh:
        node = fh.read()
    if policy == "Default" or (policy == "ClusterFirst" and pod.get("hostNetwork")):
        return node
    if policy not in ("ClusterFirst", "ClusterFirstWithHostNet"):
        raise SystemExit("dnsPolicy %s is not known here" % policy)
    search = ["%s.svc.%s" % (namespace, domain), "svc.%s" % domain, domain]
    for line in node.splitlines():
        f = line.split()
        if f and f[0] in ("search", "domain"):
            search += [x for x in f[1:] if x not in search]
    return "search %s\nnameserver %s\noptions ndots:5\n" % (" ".join(search), cluster_dns)


def kubelet_configmaps(d, ref, container):
    """the container's ConfigMap mounts: "MOUNTPATH NAME SUBPATH" (- for a directory)"""
    pod = workload(d, ref)["spec"]["template"]["spec"]
    c = next(x for x in pod["containers"] if x["name"] == container)
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    out = []
    for m in c.get("volumeMounts", []):
        cmn = (vols.get(m["name"], {}).get("configMap") or {}).get("name")
        if cmn:
            out.append("%s %s %s" % (m["mountPath"], cmn, m.get("subPath") or "-"))
    return out


def kubelet_mounts(d, ref, container):
    """every file the container's Secret, ConfigMap and projected mounts hold, as
    mounted_files says: "PATH KIND NAME KEY" (a token: "PATH token AUDIENCE -"; a whole
    Secret or ConfigMap: its directory, with a / and KEY -)"""
    pod = workload(d, ref)["spec"]["template"]["spec"]
    c = next(x for x in pod["containers"] if x["name"] == container)
    return ["%s %s %s %s" % (path, src[0], src[1] or "-", src[2] if src[0] != "token" and src[2] else "-")
            for path, src in sorted(mounted_files(pod, c).items())]


def dns_serve(specs, log):
    """A DNS server on UDP, for the test's cluster: SPEC is ADDR=NAME:IP,NAME:IP...
    (names without the final dot); A for those names, an empty answer for
    their other types, NXDOMAIN for every other name. "# serving" in LOG once
    it listens, then one line a query: ADDR NAME TYPE RCODE."""
    import select
    import socket
    import struct
    socks = {}
    for spec in specs:
        addr, _, recs = spec.partition("=")
        zone = {}
        for r in filter(None, recs.split(",")):
            n, _, ip = r.rpartition(":")
            zone[n.lower().rstrip(".")] = socket.inet_aton(ip)
        sk = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sk.bind((addr, 53))
        socks[sk] = (addr, zone)
    out = open(log, "a", buffering=1)
    out.write("# serving\n")
    while True:
        for sk in select.select(list(socks), [], [])[0]:
            q, peer = sk.recvfrom(512)
            addr, zone = socks[sk]
            if len(q) < 12:
                continue
            qid, flags = struct.unpack("!HH", q[:4])
            labels, i = [], 12
            while i < len(q) and q[i]:
                labels.append(q[i + 1:i + 1 + q[i]].decode("ascii", "replace"))
                i += 1 + q[i]
            if i + 5 > len(q):
                continue
            qtype = struct.unpack("!H", q[i + 1:i + 3])[0]
            question = q[12:i + 5]
            name = ".".join(labels).lower()
            rd = flags & 0x0100
            if name in zone:
                rcode, ans = 0, []
                if qtype == 1:
                    ans = [b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 5, 4) + zone[name]]
            else:
                rcode, ans = 3, []
            hdr = struct.pack("!HHHHHH", qid, 0x8400 | rd | 0x0080 | rcode, 1, len(ans), 0, 0)
            sk.sendto(hdr + question + b"".join(ans), peer)
            out.write("%s %s %d %s\n" % (addr, name, qtype, "NXDOMAIN" if rcode else "NOERROR"))


def sniff(ifname, seconds, pattern):
    """Reads the packets IFNAME carries for up to SECONDS; prints the first match
    of the regular expression PATTERN in a packet (its first group), status 1
    when none matched"""
    import socket
    import time
    rx = re.compile(pattern.encode())
    sk = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    sk.bind((ifname, 0))
    print("# sniffing", file=sys.stderr, flush=True)
    end = time.monotonic() + float(seconds)
    while time.monotonic() < end:
        sk.settimeout(max(0.05, end - time.monotonic()))
        try:
            pkt = sk.recv(65535)
        except socket.timeout:
            break
        m = rx.search(pkt)
        if m:
            print(m.group(1).decode("ascii", "replace"))
            return 0
    return 1


CHECKS = {"daemonset": check_daemonset, "allocator": check_allocator, "etcd": check_etcd,
          "certificates": check_certificates}


def teeth(lines):
    """each line "WHAT<TAB>RENDERED<TAB>CHECK [--release R] [--runbook-base URL]": the check
    run on RENDERED in this one process; prints "WHAT<TAB>refused" or "WHAT<TAB>taken" """
    for line in lines:
        if not line.strip():
            continue
        what, rendered, check = line.rstrip("\n").split("\t")
        words = check.split()
        opts = dict(zip(words[1::2], words[2::2]))
        if words[0] == "monitoring":
            p = check_monitoring(rendered, opts.get("--release", RELEASE), opts.get("--runbook-base", RUNBOOK_BASE))
        else:
            p = CHECKS[words[0]](rendered)
        print("%s\t%s" % (what, "refused" if p else "taken"), flush=True)


def main():
    args = sys.argv[1:]
    opts = {}
    while args and args[0].startswith("--"):
        if len(args) < 2:
            print("%s needs a value" % args[0], file=sys.stderr)
            return 2
        opts[args[0]] = args[1]
        args = args[2:]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    if args[0] == "dns-serve":  # dns-serve LOG SPEC...
        dns_serve(args[2:], args[1])
        return 0
    if args[0] == "sniff":  # sniff IFNAME SECONDS PATTERN
        return sniff(*args[1:4])
    if args[0] == "teeth":  # teeth - (lines on stdin)
        teeth(sys.stdin)
        return 0
    if args[0] == "api-serve":  # api-serve ADDR:PORT CERT KEY TOKEN-FILE JWKS LOG
        api_serve(*args[1:7])
        return 0
    d, what, rest = args[0], args[1], args[2:]
    fields = {}
    while "--field" in rest:
        i = rest.index("--field")
        k, _, v = rest[i + 1].partition("=")
        fields[k] = v
        del rest[i:i + 2]
    while rest and rest[0].startswith("--") and len(rest) >= 2:
        opts[rest[0]] = rest[1]
        rest = rest[2:]
    deploy = opts.get("--deploy")
    problems = []
    if what == "parse":
        for x in docs(d):
            for k in ("apiVersion", "kind"):
                if k not in x:
                    problems.append("an object without %s" % k)
            if "name" not in x.get("metadata", {}):
                problems.append("%s without metadata.name" % x.get("kind"))
            print("%s/%s" % (x.get("kind"), x.get("metadata", {}).get("name")))
    elif what == "generated":
        name, problems = check_generated(d)
        print(name)
    elif what == "daemonset":
        problems = check_daemonset(d)
    elif what == "monitoring":
        problems = check_monitoring(d, opts.get("--release", RELEASE), opts.get("--runbook-base", RUNBOOK_BASE))
    elif what == "runbook":
        problems = check_runbook(d, rest[0])
    elif what == "conflist":
        sys.stdout.write(load_all(d)["ConfigMap"]["data"][CONFLIST_KEY])
    elif what == "policy":
        cm = policy_configmap(d)
        if cm is None:
            raise SystemExit("no ConfigMap %s in %s" % (POLICY_CM, d))
        sys.stdout.write(cm["data"][POLICY_KEY])
    elif what == "agent-args":
        print("\n".join(agent_container(load_all(d)["DaemonSet"])["command"]))
    elif what == "allocator":
        problems = check_allocator(d)
    elif what == "etcd":
        problems = check_etcd(d)
    elif what == "etcd-tls":
        problems = check_etcd_tls(d, rest[0])
    elif what == "etcd-args":
        print("\n".join(etcd_container(load_named(d)[("StatefulSet", ETCD)])["command"]))
    elif what == "allocator-args":
        print("\n".join(allocator_container(load_named(d)[(ALLOC_KIND, ALLOCATOR)])["command"]))
    elif what == "rules":
        with open(rest[0], "w") as fh:
            yaml.safe_dump(load_all(d)["PrometheusRule"]["spec"], fh, sort_keys=False)
    elif what == "dashboard-rules":
        exprs, _ = dashboard_queries(deploy)
        rules = [{"record": "dashboard:query_%d:parse" % i, "expr": grafana_subst(e)}
                 for i, e in enumerate(exprs)]
        with open(rest[0], "w") as fh:
            yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, fh, sort_keys=False)
        print(len(rules))
    elif what == "kubelet-command":  # KIND/NAME CONTAINER [--field PATH=VALUE]...
        words, env = kubelet_command(d, rest[0], rest[1], fields)
        print("\n".join(words))
    elif what == "kubelet-resolv":  # KIND/NAME NAMESPACE CLUSTER-DNS NODE-RESOLV-CONF
        sys.stdout.write(kubelet_resolv(d, *rest[:4]))
    elif what == "kubelet-mounts":  # KIND/NAME CONTAINER
        for line in kubelet_mounts(d, rest[0], rest[1]):
            print(line)
    elif what == "certificates":
        problems = check_certificates(d)
    elif what == "cert-spec":  # SECRET
        print(json.dumps(cert_spec(d, rest[0])))
    elif what == "kubelet-configmaps":  # KIND/NAME CONTAINER
        for line in kubelet_configmaps(d, rest[0], rest[1]):
            print(line)
    elif what == "no-budgets":
        problems = check_no_budgets(d, deploy)
    elif what == "names":
        _, names = referenced(d, deploy)
        print("\n".join(sorted(n for n in names if ":" not in n)))
    elif what == "undefined":
        recorded, names = referenced(d, deploy)
        print("\n".join(sorted(n for n in names if ":" in n and n not in recorded)))
    else:
        print("unknown check %s" % what, file=sys.stderr)
        return 2
    for x in problems:
        print(x)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
