#!/usr/bin/python3
"""A small CRI client: drives a runtime's RuntimeService as kubelet does.

    cri_client.py --socket SOCK [--timeout S] COMMAND [ARGS]

    version                       the runtime's name and versions (JSON)
    status                        its conditions: RuntimeReady, NetworkReady (JSON)
    run --name N --namespace NS --uid U [--attempt A] [--cgroup-parent P]
        [--annotation K=V]... [--label K=V]... [--port PROTO:CPORT:HPORT[:HOSTIP]]...
                                  RunPodSandbox; prints the sandbox's ID
    inspect ID                    PodSandboxStatus, verbose: state, IP, metadata,
                                  annotations, the sandbox process's PID and its network
                                  namespace's path (JSON)
    list                          ListPodSandbox (JSON)
    stop ID / remove ID           StopPodSandbox / RemovePodSandbox

The protocol is tests/integration/cri/cri.proto, compiled at the first call
into --gen DIR (default: $TMPDIR/tollgate-cri-<the proto's hash>) with
grpc_tools' protoc (Debian: python3-grpc-tools). A failed call prints the
gRPC status and its details on stderr and exits 1.
"""
import argparse
import hashlib
import importlib
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def load_api(gen):
    """cri_pb2 and cri_pb2_grpc, compiled from cri.proto into gen (once)."""
    os.makedirs(gen, exist_ok=True)
    if not os.path.exists(os.path.join(gen, "cri_pb2_grpc.py")):
        from grpc_tools import protoc
        rc = protoc.main(["protoc", "-I" + HERE, "--python_out=" + gen,
                          "--grpc_python_out=" + gen, os.path.join(HERE, "cri.proto")])
        if rc != 0:
            sys.exit("cri_client: protoc failed on %s (exit %d)" % (os.path.join(HERE, "cri.proto"), rc))
    sys.path.insert(0, gen)
    return importlib.import_module("cri_pb2"), importlib.import_module("cri_pb2_grpc")


def pairs(items, what):
    out = {}
    for kv in items or []:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            sys.exit("cri_client: %s '%s' is not KEY=VALUE" % (what, kv))
        out[k] = v
    return out


def port_mappings(pb, specs):
    out = []
    for s in specs or []:
        f = s.split(":")
        if len(f) not in (3, 4) or f[0].upper() not in ("TCP", "UDP", "SCTP"):
            sys.exit("cri_client: port '%s' is not PROTO:CONTAINER_PORT:HOST_PORT[:HOST_IP]" % s)
        out.append(pb.PortMapping(protocol=pb.Protocol.Value(f[0].upper()), container_port=int(f[1]),
                                  host_port=int(f[2]), host_ip=f[3] if len(f) == 4 else ""))
    return out


def meta(m):
    return {"name": m.name, "uid": m.uid, "namespace": m.namespace, "attempt": m.attempt}


def verbose_info(info):
    """The sandbox process's PID and network namespace path, from containerd's
    verbose info (a JSON document under "info")."""
    try:
        doc = json.loads(info.get("info", "{}"))
    except ValueError:
        return 0, ""
    path = ""
    for ns in doc.get("runtimeSpec", {}).get("linux", {}).get("namespaces", []):
        if ns.get("type") == "network":
            path = ns.get("path", "")
    return doc.get("pid", 0), path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--timeout", type=float, default=60)
    with open(os.path.join(HERE, "cri.proto"), "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()[:16]
    ap.add_argument("--gen", default=os.path.join(tempfile.gettempdir(), "tollgate-cri-" + digest))
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("version")
    sub.add_parser("status")
    r = sub.add_parser("run")
    r.add_argument("--name", required=True)
    r.add_argument("--namespace", required=True)
    r.add_argument("--uid", required=True)
    r.add_argument("--attempt", type=int, default=0)
    r.add_argument("--cgroup-parent", default="")
    r.add_argument("--annotation", action="append")
    r.add_argument("--label", action="append")
    r.add_argument("--port", action="append")
    for c in ("inspect", "stop", "remove"):
        sub.add_parser(c).add_argument("id")
    sub.add_parser("list")
    a = ap.parse_args()

    pb, rpc = load_api(a.gen)
    import grpc
    channel = grpc.insecure_channel("unix://" + a.socket)
    rt = rpc.RuntimeServiceStub(channel)
    t = a.timeout
    try:
        if a.cmd == "version":
            v = rt.Version(pb.VersionRequest(version="v1"), timeout=t)
            print(json.dumps({"runtime_name": v.runtime_name, "runtime_version": v.runtime_version,
                              "runtime_api_version": v.runtime_api_version}))
        elif a.cmd == "status":
            s = rt.Status(pb.StatusRequest(), timeout=t)
            print(json.dumps({"conditions": [{"type": c.type, "status": c.status, "reason": c.reason,
                                              "message": c.message} for c in s.status.conditions]}))
        elif a.cmd == "run":
            cfg = pb.PodSandboxConfig(
                metadata=pb.PodSandboxMetadata(name=a.name, uid=a.uid, namespace=a.namespace,
                                               attempt=a.attempt),
                hostname=a.name[:63],
                port_mappings=port_mappings(pb, a.port),
                labels=pairs(a.label, "label"),
                annotations=pairs(a.annotation, "annotation"),
                linux=pb.LinuxPodSandboxConfig(
                    cgroup_parent=a.cgroup_parent,
                    security_context=pb.LinuxSandboxSecurityContext(
                        namespace_options=pb.NamespaceOption(network=pb.POD, pid=pb.CONTAINER,
                                                             ipc=pb.POD))))
            print(rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg), timeout=t).pod_sandbox_id)
        elif a.cmd == "inspect":
            r = rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=a.id, verbose=True), timeout=t)
            s = r.status
            pid, netns = verbose_info(dict(r.info))
            print(json.dumps({"id": s.id, "state": pb.PodSandboxState.Name(s.state), "ip": s.network.ip,
                              "additional_ips": [i.ip for i in s.network.additional_ips],
                              "metadata": meta(s.metadata), "annotations": dict(s.annotations),
                              "pid": pid, "netns": netns}))
        elif a.cmd == "list":
            items = rt.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=t).items
            print(json.dumps([{"id": i.id, "state": pb.PodSandboxState.Name(i.state), "metadata": meta(i.metadata)}
                              for i in items]))
        elif a.cmd == "stop":
            rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=a.id), timeout=t)
        elif a.cmd == "remove":
            rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=a.id), timeout=t)
    except grpc.RpcError as e:
        print("cri_client: %s: %s: %s" % (a.cmd, e.code().name, e.details()), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
