# Owns the flask-websub peer of the push benchmark (bench/lib/peers.ts): a hub modelled on the library's
# server_example.py, with PUBLISH_SUPPORTED so a publisher's hub.mode=publish is accepted (the example's
# topic validator left out: any topic, any callback). Serves the hub at /hub on 127.0.0.1:PEER_PORT
# (`python3 flask_websub_hub.py`, Werkzeug's threaded server as in the example) and is also the Celery app
# of its worker (`python3 -m celery -A flask_websub_hub worker`), which verifies intents and delivers.
# Environment: PEER_PORT, PEER_DB (the SQLite file both processes share), PEER_BROKER (a redis URL).
import os
import sqlite3
import sys

from celery import Celery
from celery.signals import worker_ready
from flask import Flask, request
from flask_websub.hub import Hub, SQLite3HubStorage

app = Flask(__name__)
celery = Celery('flask_websub_hub', broker=os.environ['PEER_BROKER'])
# No results are read; the tasks' return values need not be kept anywhere.
celery.conf.task_ignore_result = True
app.config['PUBLISH_SUPPORTED'] = True
hub = Hub(SQLite3HubStorage(os.environ['PEER_DB']), celery, **app.config)
app.register_blueprint(hub.build_blueprint(url_prefix='/hub'))


@app.route('/')
def ready():
    return 'ok'


@app.route('/count')
def count():
    # How many callbacks the hub has stored for a topic: the bench waits for every subscription's
    # verification to have been done by the worker before its rounds.
    with sqlite3.connect(os.environ['PEER_DB']) as c:
        (n,) = c.execute('select count(*) from hub where topic_url = ?', (request.args['topic'],)).fetchone()
    return str(n)


@worker_ready.connect
def announce(**_):
    # The bench waits for this line before it subscribes anyone.
    print('worker ready', flush=True)


if __name__ == '__main__':
    print('hub ready', file=sys.stderr, flush=True)
    app.run(host='127.0.0.1', port=int(os.environ['PEER_PORT']), threaded=True)
