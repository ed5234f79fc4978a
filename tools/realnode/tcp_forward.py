#!/usr/bin/env python3
"""A TCP forwarder: accepts on LISTEN_HOST:LISTEN_PORT and joins each
connection to TARGET_HOST:TARGET_PORT, bytes unchanged (TLS passes through).

  tcp_forward.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT

The real-node harness (tools/realnode) runs one per node: the loopback
control plane's kube-apiserver listens on 127.0.0.1 only, and a kubelet in the
node's network namespace reaches it through the host-side address of the
node's veth pair. Runs until killed; a connection's two directions are
copied by two threads and both sockets close when either side does.
"""
import socket
import sys
import threading


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(conn, target):
    try:
        upstream = socket.create_connection(target)
    except OSError:
        conn.close()
        return
    for a, b in ((conn, upstream), (upstream, conn)):
        threading.Thread(target=pipe, args=(a, b), daemon=True).start()


def main():
    listen_host, listen_port, target_host, target_port = sys.argv[1:5]
    server = socket.create_server((listen_host, int(listen_port)), reuse_port=False)
    target = (target_host, int(target_port))
    while True:
        conn, _ = server.accept()
        serve(conn, target)


if __name__ == "__main__":
    main()
