#!/usr/bin/env python3
"""Turn Tollgate's Prometheus Operator manifests into a plain Prometheus setup.

For tests/integration/test_cluster.sh: a real Prometheus scrapes the agents of
a simulated cluster exactly as the Operator would configure it from
deploy/podmonitor.yaml, and evaluates deploy/prometheusrule.yaml.

  podmonitor_to_prom.py --podmonitor PM.yaml --daemonset DS.yaml --rules PR.yaml
                        --node NAME=IP [--node ...] [--decoy NAME=IP]
                        --out DIR [--scrape-interval 1s] [--eval-interval 1s]
  podmonitor_to_prom.py --rules-using METRIC --rules PR.yaml

Writes DIR/prometheus.yml, DIR/targets.json and DIR/rules.yml.

The PodMonitor is the one of the file whose selector picks the DaemonSet's
pods (the file also holds the allocator's). The scrape job is what the
Operator generates for each podMetricsEndpoint
(job_name podMonitor/NS/NAME/I, its selector, port and namespace relabelling,
the job and endpoint labels, the endpoint's relabelings, the sharding
hashmod, metricRelabelings as metric_relabel_configs), with one change:
kubernetes_sd_configs (role pod) is replaced by file_sd_configs. The file
lists what Kubernetes pod discovery would find: one pod of the DaemonSet per
node (hostNetwork: the pod's IP is the node's), a target per container port,
with the __meta_kubernetes_pod_* labels discovery sets. The PodMonitor's
namespaceSelector is applied here, as discovery applies it; its selector and
port are applied by the generated relabelling, so a --decoy pod (same
namespace and port name, another app label, the port number one above) must
be dropped by it.

The rules file is the PrometheusRule's spec.groups. --scrape-interval and
--eval-interval replace the manifests' intervals (30 s) so that a test sees
its traffic within seconds; nothing else is changed.

--rules-using prints the name of every recording rule that reads METRIC.
"""
import argparse
import json
import os
import re
import sys

import yaml


def sanitize(name):
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def load_one(path, kind, match=None):
    """The first object of that kind (for which match(doc) holds, when given)."""
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for d in docs:
        if d.get("kind") == kind and (match is None or match(d)):
            return d
    raise SystemExit("%s: no %s in it%s" % (path, kind, " that fits" if match else ""))


def selects(pm, pod_labels):
    """The PodMonitor's selector picks pods with these labels."""
    want = (pm.get("spec", {}).get("selector") or {}).get("matchLabels") or {}
    return bool(want) and all(pod_labels.get(k) == v for k, v in want.items())


RELABEL_KEYS = {
    "sourceLabels": "source_labels",
    "separator": "separator",
    "targetLabel": "target_label",
    "regex": "regex",
    "modulus": "modulus",
    "replacement": "replacement",
    "action": "action",
}


def relabel(rc):
    """A monitoring.coreos.com RelabelConfig as Prometheus writes it."""
    out = {}
    for k, v in rc.items():
        if k not in RELABEL_KEYS:
            raise SystemExit("relabeling key %r unknown to this converter" % k)
        out[RELABEL_KEYS[k]] = v.lower() if k == "action" else v
    return out


def selector_relabels(sel):
    """The Operator's keep/drop rules for a PodMonitor's label selector."""
    out = []
    for k in sorted((sel.get("matchLabels") or {})):
        v = sel["matchLabels"][k]
        out.append({"action": "keep",
                    "source_labels": ["__meta_kubernetes_pod_label_" + sanitize(k),
                                      "__meta_kubernetes_pod_labelpresent_" + sanitize(k)],
                    "regex": "(%s);true" % v})
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e["key"], e["operator"], e.get("values") or []
        lab = "__meta_kubernetes_pod_label_" + sanitize(k)
        pres = "__meta_kubernetes_pod_labelpresent_" + sanitize(k)
        if op == "In":
            out.append({"action": "keep", "source_labels": [lab, pres], "regex": "(%s);true" % "|".join(vals)})
        elif op == "NotIn":
            out.append({"action": "drop", "source_labels": [lab, pres], "regex": "(%s);true" % "|".join(vals)})
        elif op == "Exists":
            out.append({"action": "keep", "source_labels": [pres], "regex": "true"})
        elif op == "DoesNotExist":
            out.append({"action": "drop", "source_labels": [pres], "regex": "true"})
        else:
            raise SystemExit("selector operator %r unknown" % op)
    return out


def scrape_configs(pm, sd_file, scrape_interval):
    meta, spec = pm["metadata"], pm["spec"]
    ns, name = meta.get("namespace", "default"), meta["name"]
    jobs = []
    for i, ep in enumerate(spec.get("podMetricsEndpoints") or []):
        job = {"job_name": "podMonitor/%s/%s/%d" % (ns, name, i),
               "honor_labels": bool(ep.get("honorLabels", False)),
               "file_sd_configs": [{"files": [sd_file], "refresh_interval": "5s"}]}
        if "honorTimestamps" in ep:
            job["honor_timestamps"] = bool(ep["honorTimestamps"])
        interval = scrape_interval or ep.get("interval")
        if interval:
            job["scrape_interval"] = interval
        timeout = ep.get("scrapeTimeout")
        if timeout and scrape_interval:
            timeout = scrape_interval  # must not exceed the interval
        if timeout:
            job["scrape_timeout"] = timeout
        if ep.get("path"):
            job["metrics_path"] = ep["path"]
        if ep.get("scheme"):
            job["scheme"] = ep["scheme"]
        if ep.get("params"):
            job["params"] = ep["params"]
        rl = [{"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"}]
        rl.append({"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"],
                   "regex": "(Failed|Succeeded)"})
        rl += selector_relabels(spec.get("selector") or {})
        if ep.get("port"):
            rl.append({"action": "keep", "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                       "regex": ep["port"]})
        elif ep.get("targetPort") is not None:
            rl.append({"action": "keep", "source_labels": ["__meta_kubernetes_pod_container_port_number"],
                       "regex": str(ep["targetPort"])})
        rl += [
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        ]
        for lab in spec.get("podTargetLabels") or []:
            rl.append({"source_labels": ["__meta_kubernetes_pod_label_" + sanitize(lab)],
                       "target_label": sanitize(lab), "regex": "(.+)", "replacement": "${1}"})
        rl.append({"target_label": "job", "replacement": "%s/%s" % (ns, name)})
        if spec.get("jobLabel"):
            rl.append({"source_labels": ["__meta_kubernetes_pod_label_" + sanitize(spec["jobLabel"])],
                       "target_label": "job", "regex": "(.+)", "replacement": "${1}"})
        if ep.get("port"):
            rl.append({"target_label": "endpoint", "replacement": ep["port"]})
        elif ep.get("targetPort") is not None:
            rl.append({"target_label": "endpoint", "replacement": str(ep["targetPort"])})
        rl += [relabel(r) for r in ep.get("relabelings") or []]
        # one Prometheus shard
        rl += [{"source_labels": ["__address__"], "target_label": "__tmp_hash", "modulus": 1, "action": "hashmod"},
               {"source_labels": ["__tmp_hash"], "regex": "0", "action": "keep"}]
        job["relabel_configs"] = rl
        mrl = [relabel(r) for r in ep.get("metricRelabelings") or []]
        if mrl:
            job["metric_relabel_configs"] = mrl
        jobs.append(job)
    if not jobs:
        raise SystemExit("the PodMonitor has no podMetricsEndpoints")
    return jobs


def discovered(ds, nodes, decoys, wanted_namespaces):
    """What kubernetes_sd (role pod) finds: the DaemonSet's pod on every node."""
    ns = ds["metadata"].get("namespace", "default")
    tmpl = ds["spec"]["template"]
    pspec = tmpl["spec"]
    if not pspec.get("hostNetwork"):
        raise SystemExit("the DaemonSet is not hostNetwork: its pods' IPs are not the nodes'")
    groups = []

    def pod(node, ip, pod_name, labels, port_shift=0):
        meta = {"__meta_kubernetes_namespace": ns,
                "__meta_kubernetes_pod_name": pod_name,
                "__meta_kubernetes_pod_ip": ip,
                "__meta_kubernetes_pod_host_ip": ip,
                "__meta_kubernetes_pod_node_name": node,
                "__meta_kubernetes_pod_ready": "true",
                "__meta_kubernetes_pod_phase": "Running",
                "__meta_kubernetes_pod_controller_kind": "DaemonSet",
                "__meta_kubernetes_pod_controller_name": ds["metadata"]["name"]}
        for k, v in labels.items():
            meta["__meta_kubernetes_pod_label_" + sanitize(k)] = str(v)
            meta["__meta_kubernetes_pod_labelpresent_" + sanitize(k)] = "true"
        for k, v in (tmpl["metadata"].get("annotations") or {}).items():
            meta["__meta_kubernetes_pod_annotation_" + sanitize(k)] = str(v)
            meta["__meta_kubernetes_pod_annotationpresent_" + sanitize(k)] = "true"
        for c in pspec["containers"]:
            for p in c.get("ports") or []:
                m = dict(meta)
                m["__meta_kubernetes_pod_container_name"] = c["name"]
                m["__meta_kubernetes_pod_container_image"] = c.get("image", "")
                m["__meta_kubernetes_pod_container_port_name"] = p.get("name", "")
                m["__meta_kubernetes_pod_container_port_protocol"] = p.get("protocol", "TCP")
                port = p["containerPort"] + port_shift
                m["__meta_kubernetes_pod_container_port_number"] = str(port)
                groups.append({"targets": ["%s:%d" % (ip, port)], "labels": m})

    if wanted_namespaces is not None and ns not in wanted_namespaces:
        return groups
    labels = tmpl["metadata"].get("labels") or {}
    for node, ip in nodes:
        pod(node, ip, "%s-%s" % (ds["metadata"]["name"], sanitize(node).replace("_", "-")), labels)
    for node, ip in decoys:
        # another DaemonSet's pod in the same namespace, its port named alike
        # but one above (nothing listens there): the selector must drop it,
        # or it shows as a target that is down
        pod(node, ip, "decoy-%s" % node, {k: "decoy" for k in labels} or {"app": "decoy"}, 1)
    return groups


def rules_file(pr, eval_interval):
    groups = []
    for g in pr["spec"]["groups"]:
        g = {k: v for k, v in g.items() if k in ("name", "interval", "rules", "limit")}
        if eval_interval:
            g["interval"] = eval_interval
        groups.append(g)
    return {"groups": groups}


def node_arg(s):
    if "=" not in s:
        raise argparse.ArgumentTypeError("NAME=IP expected")
    return tuple(s.split("=", 1))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--podmonitor")
    p.add_argument("--daemonset")
    p.add_argument("--rules", required=True)
    p.add_argument("--node", type=node_arg, action="append", default=[])
    p.add_argument("--decoy", type=node_arg, action="append", default=[])
    p.add_argument("--out")
    p.add_argument("--scrape-interval", default="")
    p.add_argument("--eval-interval", default="")
    p.add_argument("--rules-using", metavar="METRIC")
    a = p.parse_args()
    pr = load_one(a.rules, "PrometheusRule")
    if a.rules_using:
        for g in pr["spec"]["groups"]:
            for r in g.get("rules") or []:
                if "record" in r and re.search(r"\b%s\b" % re.escape(a.rules_using), str(r["expr"])):
                    print(r["record"])
        return 0
    if not (a.podmonitor and a.daemonset and a.out and a.node):
        p.error("--podmonitor, --daemonset, --out and --node are needed")
    ds = load_one(a.daemonset, "DaemonSet")
    # the file holds the allocator's PodMonitor too: the one for these pods
    pm = load_one(a.podmonitor, "PodMonitor",
                  lambda d: selects(d, ds["spec"]["template"]["metadata"]["labels"]))
    nsel = pm["spec"].get("namespaceSelector") or {}
    wanted = None if nsel.get("any") else set(nsel.get("matchNames") or [pm["metadata"].get("namespace", "default")])
    sd_file = os.path.join(a.out, "targets.json")
    targets = discovered(ds, a.node, a.decoy, wanted)
    with open(sd_file + ".tmp", "w") as f:
        json.dump(targets, f, indent=1)
    os.rename(sd_file + ".tmp", sd_file)
    rules_path = os.path.join(a.out, "rules.yml")
    with open(rules_path, "w") as f:
        yaml.safe_dump(rules_file(pr, a.eval_interval), f, sort_keys=False)
    conf = {"global": {"scrape_interval": a.scrape_interval or "30s",
                       "evaluation_interval": a.eval_interval or "30s"},
            "rule_files": [rules_path],
            "scrape_configs": scrape_configs(pm, sd_file, a.scrape_interval)}
    with open(os.path.join(a.out, "prometheus.yml"), "w") as f:
        yaml.safe_dump(conf, f, sort_keys=False)
    print("%d targets discovered, %d scrape jobs, %d rule groups" % (
        len(targets), len(conf["scrape_configs"]), len(pr["spec"]["groups"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
