// Reading a pleaseNotify into its endpoint and resources (pure): rsscloud-server's rules, and an IPv6
// requester's address in brackets.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseNotify, restFields, rpcFields } from '../../../src/push/rsscloud/params.js';

test('the endpoint is protocol://domain-or-requester:port/path; a path gets its slash; an IPv6 requester is bracketed', () => {
  const f = {
    notifyProcedure: undefined,
    port: '5337',
    path: 'feedupdated',
    protocol: 'http-post',
    domain: undefined,
    urls: ['https://b.example/feed'],
  };
  const v4 = parseNotify(f, '203.0.113.7', 10);
  assert.ok(v4.ok);
  assert.deepEqual(v4.request, {
    protocol: 'http-post',
    notifyProcedure: null,
    notifyUrl: 'http://203.0.113.7:5337/feedupdated',
    endpointHost: '203.0.113.7',
    viaDomain: false,
    urls: ['https://b.example/feed'],
  });
  const v6 = parseNotify({ ...f, protocol: 'https-post' }, '2001:db8::7', 10);
  assert.ok(v6.ok);
  assert.equal(v6.request.notifyUrl, 'https://[2001:db8::7]:5337/feedupdated');
  assert.equal(v6.request.endpointHost, '2001:db8::7');
  const d = parseNotify(
    { ...f, domain: 'Reader.Example.org', urls: ['https://b.example/feed', 'https://b.example/feed#x'] },
    '203.0.113.7',
    10,
  );
  assert.ok(d.ok);
  assert.equal(d.request.notifyUrl, 'http://reader.example.org:5337/feedupdated');
  assert.equal(d.request.viaDomain, true);
  assert.deepEqual(d.request.urls, ['https://b.example/feed'], 'one resource once');
  assert.deepEqual(parseNotify(f, null, 10), { ok: false, msg: 'The request has no client address to notify: give a domain.' });
  assert.deepEqual(parseNotify({ ...f, domain: 'a..example' }, null, 10), {
    ok: false,
    msg: 'The domain must be a host name or an IP address, without a port or a path.',
  });
});

test('restFields: every url* parameter in order; a repeated single parameter is refused', () => {
  assert.deepEqual(restFields({ url1: 'a', port: '1', URL2: 'b', path: '/', protocol: 'http-post', notifyProcedure: '' }), {
    notifyProcedure: '',
    port: '1',
    path: '/',
    protocol: 'http-post',
    domain: undefined,
    urls: ['a', 'b'],
  });
  assert.deepEqual(restFields({ port: ['1', '2'] }), { error: 'The parameter port must be given once.' });
});

test('rpcFields: 5 or 6 parameters, the port an int, urlList an array of strings', () => {
  const s = (v: string) => ({ type: 'string' as const, value: v });
  const arr = { type: 'array' as const, value: [s('https://b.example/feed')] };
  assert.deepEqual(rpcFields([s(''), { type: 'int', value: 80 }, s('/p'), s('http-post'), arr]), {
    notifyProcedure: '',
    port: '80',
    path: '/p',
    protocol: 'http-post',
    domain: undefined,
    urls: ['https://b.example/feed'],
  });
  assert.deepEqual(rpcFields([s(''), s('80'), s('/p'), s('http-post')]), {
    error: 'Can\'t call "pleaseNotify" because there aren\'t enough parameters.',
  });
  assert.deepEqual(rpcFields([s(''), s('80'), s('/p'), s('http-post'), { type: 'array', value: [{ type: 'struct', value: new Map() }] }]), {
    error: 'The urlList must be an array of strings.',
  });
});

test('xml-rpc: the notifyProcedure is kept (an XML-RPC method name, required); http-post ignores it', () => {
  const f = {
    notifyProcedure: 'river.feedUpdated',
    port: '5337',
    path: '/RPC2',
    protocol: 'xml-rpc',
    domain: undefined,
    urls: ['https://b.example/feed'],
  };
  const x = parseNotify(f, '203.0.113.7', 10);
  assert.ok(x.ok);
  assert.deepEqual(
    [x.request.protocol, x.request.notifyProcedure, x.request.notifyUrl],
    ['xml-rpc', 'river.feedUpdated', 'http://203.0.113.7:5337/RPC2'],
  );
  const noProc = 'The notifyProcedure must be given for the xml-rpc protocol: the name of the method to call on the endpoint.';
  assert.deepEqual(parseNotify({ ...f, notifyProcedure: undefined }, '203.0.113.7', 10), { ok: false, msg: noProc });
  assert.deepEqual(parseNotify({ ...f, notifyProcedure: ' ' }, '203.0.113.7', 10), { ok: false, msg: noProc });
  assert.deepEqual(parseNotify({ ...f, notifyProcedure: 'a b<c>' }, '203.0.113.7', 10), {
    ok: false,
    msg: 'The notifyProcedure must be an XML-RPC method name (letters, digits, _ . : /), at most 128 characters.',
  });
  const post = parseNotify({ ...f, protocol: 'http-post' }, '203.0.113.7', 10);
  assert.ok(post.ok);
  assert.equal(post.request.notifyProcedure, null);
  assert.deepEqual(parseNotify({ ...f, protocol: 'soap' }, '203.0.113.7', 10), {
    ok: false,
    msg: "Can't accept the subscription because the protocol, soap, is unsupported.",
  });
});

test('port 443 is https whatever the protocol, as rsscloud-server 2.4.0 on notifies it', () => {
  const f = { notifyProcedure: 'n.x', port: '443', path: '/p', protocol: 'http-post', domain: 'r.example', urls: ['https://b.example/f'] };
  for (const protocol of ['http-post', 'https-post', 'xml-rpc']) {
    const r = parseNotify({ ...f, protocol }, null, 10);
    assert.ok(r.ok);
    assert.equal(r.request.notifyUrl, 'https://r.example/p', protocol);
  }
  const r = parseNotify({ ...f, port: '8443' }, null, 10);
  assert.ok(r.ok);
  assert.equal(r.request.notifyUrl, 'http://r.example:8443/p');
});
