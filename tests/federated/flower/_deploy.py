"""A Flower deployment on loopback for the tests: one SuperLink, SuperNodes, ``flwr run``.

Every process is started in its own session and ended with its process group (SIGTERM,
then SIGKILL) by :meth:`Deployment.close`, which the tests' fixtures call in their
finalisers whatever happened. Ports are free loopback ports; ``FLWR_HOME`` is a temporary
folder, so nothing is written to the user's ``~/.flwr``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

#: Seconds a deployment may take to start (generous: a loaded 2-core machine).
START_TIMEOUT = 300.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Deployment:
    """Flower on loopback in ``root``: :meth:`start_superlink`, :meth:`start_supernode`,
    :meth:`run` (``flwr run`` and wait for ``results.json``), :meth:`close`."""

    def __init__(self, root: Path, tls: bool = True) -> None:
        self.root = Path(root)
        self.certs = make_certificates(self.root / "certs") if tls else None
        self.home = self.root / "flwr_home"
        self.home.mkdir(parents=True, exist_ok=True)
        bin_dir = str(Path(sys.executable).parent)
        self.env = dict(os.environ)
        self.env.update(
            FLWR_HOME=str(self.home),
            PATH=bin_dir + os.pathsep + self.env.get("PATH", ""),
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
            OPENBLAS_NUM_THREADS="1",
            PYTHONPATH=str(Path(__file__).resolve().parents[3])
            + os.pathsep
            + self.env.get("PYTHONPATH", ""),
        )
        self.procs: dict[str, subprocess.Popen] = {}
        self.port: int | None = None

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "w")
        proc = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.env,
            cwd=self.root,
            start_new_session=True,
        )
        log.close()
        self.procs[name] = proc
        return proc

    def _link_tls(self) -> list[str]:
        if self.certs is None:
            return ["--insecure"]
        c = self.certs
        return [
            "--ssl-certfile",
            str(c["cert"]),
            "--ssl-keyfile",
            str(c["key"]),
            "--ssl-ca-certfile",
            str(c["ca"]),
        ]

    def _tool(self, name: str) -> str:
        path = Path(sys.executable).parent / name
        return str(path) if path.exists() else name

    def start_superlink(self) -> int:
        self.port = free_port()
        self._spawn(
            "superlink",
            [
                self._tool("flower-superlink"),
                *self._link_tls(),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--disable-runtime-dependency-installation",
            ],
        )
        end = time.monotonic() + START_TIMEOUT
        while not _port_open(self.port):
            if self.procs["superlink"].poll() is not None or time.monotonic() > end:
                raise RuntimeError("SuperLink did not start:\n" + self.log("superlink"))
            time.sleep(0.5)
        security = f'root-certificates = "{self.certs["ca"]}"' if self.certs else "insecure = true"
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "local"\n\n[superlink.local]\n'
            f'address = "127.0.0.1:{self.port}"\n{security}\n'
        )
        return self.port

    def start_supernode(self, name: str, data: Path) -> subprocess.Popen:
        node_config = f'data="{data}" threads=1'
        return self._spawn(
            name,
            [
                self._tool("flower-supernode"),
                *(["--root-certificates", str(self.certs["ca"])] if self.certs else ["--insecure"]),
                "--superlink",
                f"127.0.0.1:{self.port}",
                "--port",
                str(free_port()),
                "--node-config",
                node_config,
            ],
        )

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name)
        _end(proc)

    def run(self, app: Path, out: Path, timeout: float, **config) -> dict:
        """``flwr run app`` with ``config`` as run config; waits for ``out/results.json``."""
        results = out / "results.json"
        if results.exists():
            results.unlink()
        pairs = " ".join(
            f"{k}={json.dumps(v) if isinstance(v, str) else str(v).lower()}"
            for k, v in {"out": str(out), **config}.items()
        )
        done = subprocess.run(
            [self._tool("flwr"), "run", str(app), "local", "--run-config", pairs],
            env=self.env,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT,
        )
        if done.returncode != 0:
            raise RuntimeError(f"flwr run failed:\n{done.stdout}\n{done.stderr}")
        end = time.monotonic() + timeout
        while not results.exists():
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead or time.monotonic() > end:
                raise RuntimeError(f"no results (dead: {dead}):\n" + self.logs())
            time.sleep(1.0)
        return json.loads(results.read_text())

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text()[-4000:] if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(f"--- {n} ---\n{self.log(n)}" for n in sorted(self.procs))

    def close(self) -> None:
        started = [p.pid for p in self.procs.values()]
        family = _descendants(started)  # e.g. the SuperLink's SuperExec: its own session
        for name in list(self.procs):
            _end(self.procs.pop(name))
        for pid, start in family:
            if _start_time(pid) == start:  # still that process, not a reused id
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass


def _stat(pid: int | str) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_time(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[19] if fields else None


def _descendants(pids: list[int]) -> list[tuple[int, str]]:
    """``(pid, start time)`` of every living descendant of ``pids`` (from ``/proc``)."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        fields = _stat(entry.name)
        if fields:
            children.setdefault(int(fields[1]), []).append((int(entry.name), fields[19]))
    out, todo = [], list(pids)
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child[0])
    return out


def make_certificates(folder: Path) -> dict[str, Path]:
    """A test CA and a server certificate for 127.0.0.1/localhost (``cryptography``, a
    dependency of flwr): paths ``ca``, ``cert``, ``key``."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sci-moe test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    san = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(san, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = {"ca": folder / "ca.crt", "cert": folder / "server.pem", "key": folder / "server.key"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


def _end(proc: subprocess.Popen) -> None:
    """End ``proc`` and its process group (its SuperExec and app processes)."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            try:  # the group may outlive its leader
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        except subprocess.TimeoutExpired:
            continue
