"""Starts localstripe (a stateful fake of Stripe's API) for one test.

It listens on 127.0.0.1 only, on a port the kernel picks, and prints that
port on its first line of output. Its state stays in memory: the stock
server pickles its whole store after every write to the fixed path
/tmp/localstripe.pickle, which the servers of parallel tests would share.
"""

import socket
import sys

from aiohttp import web
from localstripe import resources
from localstripe.server import app

resources.Store.dump_to_disk = lambda self: None

sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", 0))
print(sock.getsockname()[1], flush=True)
web.run_app(app, sock=sock, print=None, access_log=None)
