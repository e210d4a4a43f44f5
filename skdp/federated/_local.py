"""A Flower deployment on this machine, for demos and tests."""

import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ._transport import FederatedError


def save_silo(path, X, y, sensitive=None, unit_ids=None):
    """Write one silo's records as the ``.npz`` file a SuperNode reads
    (``data-path`` in its node config): arrays ``X``, ``y`` and, when given,
    ``sensitive`` and ``unit_ids`` (each record's privacy unit: the silo
    then protects units, see :class:`~skdp.federated.FermiSilo`). Returns
    the path."""
    arrays = {"X": np.asarray(X, dtype=np.float64), "y": np.asarray(y)}
    if sensitive is not None:
        arrays["sensitive"] = np.asarray(sensitive)
    if unit_ids is not None:
        arrays["unit_ids"] = np.asarray(unit_ids)
    for name, value in arrays.items():
        if value.dtype == object:
            arrays[name] = value.astype(str)
    path = Path(path)
    np.savez(path, **arrays)
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def write_localhost_certificates(directory):
    """Write a throw-away certificate authority and a server certificate for
    127.0.0.1 / localhost (``ca.crt``, ``server.pem``, ``server.key``) to
    ``directory``, for a TLS federation on one machine (tests, demos). A
    real deployment uses certificates from the institutions' own CA.

    Returns
    -------
    dict of str to pathlib.Path
        ``ca``, ``cert`` and ``key``.
    """
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    valid = dict(not_valid_before=now - datetime.timedelta(minutes=5),
                 not_valid_after=now + datetime.timedelta(days=2))

    def name(common):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("skdp local CA"))
          .issuer_name(name("skdp local CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(valid["not_valid_before"]).not_valid_after(valid["not_valid_after"])
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(name("localhost"))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(valid["not_valid_before"]).not_valid_after(valid["not_valid_after"])
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = {"ca": directory / "ca.crt", "cert": directory / "server.pem",
             "key": directory / "server.key"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return paths


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port, timeout, process, log):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise FederatedError(f"a Flower process exited at start; see {log}:\n"
                                 f"{_tail(log)}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise FederatedError(f"nothing listens on 127.0.0.1:{port} after {timeout:g} s; see {log}")


def _tail(path, n=30):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


class LocalFederation:
    """A localhost Flower federation: one SuperLink and one SuperNode per
    silo (``python -m skdp.federated.supernode``: Flower's SuperNode with a
    warm ClientApp), all on 127.0.0.1 without TLS. For demos and tests; a
    real deployment runs the same commands on the silos' machines with TLS
    (see :ref:`federated`).

    Use it as a context manager: every process it started is stopped (by
    its process group, whose id is the PID it started) on exit.

    Parameters
    ----------
    silos : list of (X, y, sensitive) or (X, y, sensitive, unit_ids) tuples, or of ``.npz`` paths
        One entry per silo (``sensitive`` and ``unit_ids`` may be None).
    allow_seeded_noise : bool, default=True
        Node config of every silo: accept a seed (reproducible runs).
    allow_non_private : bool, default=False
    max_epsilon : float or None, default=None
        Node config ``max-epsilon`` of every silo (None: no cap).
    privacy_units : sequence of str, default=("record",)
        Node config ``privacy-units`` of every silo: the privacy units it
        accepts (see :class:`~skdp.federated.SiloPolicy`).
    isolation : {"warm", "subprocess"}, default="warm"
        ``"warm"``: ``python -m skdp.federated.supernode`` (the ClientApp
        runs inside the SuperNode). ``"subprocess"``: Flower's
        ``flower-supernode`` as it comes (one new ClientApp process per
        message; several seconds per round).
    tls : bool, default=False
        Run the SuperLink with TLS (certificates from
        :func:`write_localhost_certificates`, in ``workdir``) and connect the
        SuperNodes and ``flwr run`` with its CA, as a real deployment does;
        False: ``--insecure``.
    workdir : str or None
        Directory for the silo files, logs and Flower's home (default: a new
        temporary directory, removed on exit).
    start_timeout : float, default=120

    Examples
    --------
    ::

        with LocalFederation([(X0, y0, s0), (X1, y1, s1)]) as federation:
            clf = federation.fit(DPFERMIClassifier(lam=2.0), classes=[0, 1],
                                 groups=[0, 1], n_features=X0.shape[1])
    """

    def __init__(self, silos, *, allow_seeded_noise=True, allow_non_private=False,
                 max_epsilon=None, privacy_units=("record",), isolation="warm", tls=False,
                 workdir=None, start_timeout=120.0):
        if isolation not in ("warm", "subprocess"):
            raise ValueError(f"isolation must be 'warm' or 'subprocess', got {isolation!r}.")
        self.silos = list(silos)
        self.allow_seeded_noise = allow_seeded_noise
        self.allow_non_private = allow_non_private
        self.max_epsilon = max_epsilon
        self.privacy_units = (
            (privacy_units,) if isinstance(privacy_units, str) else tuple(privacy_units)
        )
        self.isolation = isolation
        self.tls = bool(tls)
        self.start_timeout = float(start_timeout)
        self._own_workdir = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix="skdp-fl-") if workdir is None else workdir)
        self.processes = {}
        self.superlink_port = None
        self.runs = 0

    # ------------------------------------------------------------- control
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    @property
    def n_silos(self):
        return len(self.silos)

    def _env(self):
        env = dict(os.environ)
        bindir = str(Path(sys.executable).parent)
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        env.update(FLWR_TELEMETRY_ENABLED="0", FLWR_DISABLE_UPDATE_CHECK="1",
                   FLWR_HOME=str(self.workdir / "flwr-home"), PYTHONUNBUFFERED="1")
        return env

    def _spawn(self, name, command):
        log = self.workdir / f"{name}.log"
        with open(log, "ab") as fh:
            process = subprocess.Popen(command, stdout=fh, stderr=subprocess.STDOUT,
                                       env=self._env(), cwd=self.workdir,
                                       start_new_session=True)
        self.processes[name] = process
        return process, log

    def _bin(self, name):
        return str(Path(sys.executable).parent / name)

    def start(self):
        """Start the SuperLink and the SuperNodes; returns once every
        SuperNode's Runtime API listens."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "flwr-home").mkdir(exist_ok=True)
        paths = []
        for j, silo in enumerate(self.silos):
            if isinstance(silo, (str, os.PathLike)):
                paths.append(Path(silo).resolve())
            else:
                paths.append(save_silo(self.workdir / f"silo{j}.npz", *silo).resolve())
        try:
            if self.tls:
                certs = write_localhost_certificates(self.workdir / "certs")
                link_security = ["--ssl-ca-certfile", str(certs["ca"]), "--ssl-certfile",
                                 str(certs["cert"]), "--ssl-keyfile", str(certs["key"])]
                node_security = ["--root-certificates", str(certs["ca"])]
                cli_security = f'root-certificates = "{certs["ca"]}"\n'
            else:
                link_security = node_security = ["--insecure"]
                cli_security = "insecure = true\n"
            self.superlink_port = _free_port()
            process, log = self._spawn("superlink", [
                self._bin("flower-superlink"), *link_security,
                "--disable-runtime-dependency-installation",
                "--host", "127.0.0.1", "--port", str(self.superlink_port),
            ])
            _wait_for_port(self.superlink_port, self.start_timeout, process, log)
            (self.workdir / "flwr-home" / "config.toml").write_text(
                '[superlink]\ndefault = "skdp-local"\n\n[superlink.skdp-local]\n'
                f'address = "127.0.0.1:{self.superlink_port}"\n' + cli_security
            )
            waits = []
            for j, path in enumerate(paths):
                port = _free_port()
                node_config = (f'partition-id={j} num-partitions={self.n_silos} '
                               f'data-path="{path}" silo-name="{j}" '
                               f'allow-seeded-noise={str(self.allow_seeded_noise).lower()} '
                               f'allow-non-private={str(self.allow_non_private).lower()} '
                               f'privacy-units="{",".join(self.privacy_units)}"')
                if self.max_epsilon is not None:
                    node_config += f" max-epsilon={float(self.max_epsilon)}"
                if self.isolation == "warm":
                    command = [sys.executable, "-m", "skdp.federated.supernode"]
                else:
                    command = [self._bin("flower-supernode")]
                command += [*node_security, "--superlink", f"127.0.0.1:{self.superlink_port}",
                            "--host", "127.0.0.1", "--port", str(port),
                            "--node-config", node_config]
                waits.append((port,) + self._spawn(f"supernode{j}", command))
            for port, process, log in waits:
                _wait_for_port(port, self.start_timeout, process, log)
        except BaseException:
            self.stop()
            raise
        return self

    def kill_silo(self, j):
        """Kill silo ``j``'s SuperNode (SIGKILL), as a crash would."""
        self._stop(f"supernode{j}", signal.SIGKILL)

    def _stop(self, name, sig=signal.SIGTERM, wait=10.0):
        process = self.processes.pop(name, None)
        if process is None:
            return
        try:
            os.killpg(process.pid, sig)  # the group this object created for it
        except (ProcessLookupError, PermissionError):
            pass
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            process.wait(timeout=wait)

    def stop(self):
        """Stop every process this federation started; remove its
        temporary directory."""
        for name in [n for n in self.processes if n.startswith("flwr-run")]:
            self._stop(name)
        for name in [n for n in self.processes if n.startswith("supernode")]:
            self._stop(name)
        self._stop("superlink")
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # ----------------------------------------------------------------- runs
    def fit(self, estimator, *, classes, groups=None, n_features, timeout=600.0,
            round_timeout=60.0, node_timeout=60.0):
        """Run ``flwr run`` for one fit and return the fitted estimator that
        the ServerApp wrote.

        Raises
        ------
        FederatedError
            When the run ends without a fitted estimator (the ServerApp's
            error, e.g. a silo that stopped answering, is in the message).
        """
        from .app import write_app

        self.runs += 1
        run_dir = self.workdir / f"run{self.runs}"
        output = run_dir / "model.pkl"
        params = estimator.get_params(deep=False)
        # the deployment is the engine: the silos' app gets the other options
        options = {k: v for k, v in (params.get("solver_options") or {}).items()
                   if k not in ("engine", "engine_options")}
        params["solver_options"] = options or None
        for key in ("module",):
            if params.get(key) is not None:
                raise ValueError(f"a Flower deployment cannot ship {key}=...; use "
                                 "hidden_layer_sizes.")
        params = {k: v for k, v in params.items() if v is not None or k in ("epsilon",)}
        write_app(run_dir, n_silos=self.n_silos, n_features=int(n_features),
                  classes=json.dumps(_jsonable(classes)),
                  groups=json.dumps(_jsonable(groups if groups is not None else [])),
                  estimator_params=json.dumps(_jsonable(params)), output=str(output),
                  round_timeout=float(round_timeout), node_timeout=float(node_timeout))
        name = f"flwr-run{self.runs}"
        process, log = self._spawn(name, [self._bin("flwr"), "run", str(run_dir),
                                          "skdp-local", "--stream"])
        try:
            deadline = time.monotonic() + timeout
            while process.poll() is None and not output.exists():
                if time.monotonic() > deadline:
                    raise FederatedError(f"the run took more than {timeout:g} s; see {log}")
                time.sleep(0.05)
        finally:
            self._stop(name, wait=5.0)
        if not output.exists():
            raise FederatedError(
                "the Flower run ended without a fitted estimator; the ServerApp said:\n"
                + _server_error(_tail(log, 60))
            )
        with open(output, "rb") as fh:
            return pickle.load(fh)


def _server_error(text):
    lines = [line for line in text.splitlines() if "Error" in line or "error" in line]
    return "\n".join(lines[-5:]) if lines else text


def _jsonable(value):
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value
