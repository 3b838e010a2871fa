// Binary through third-party clients over a real port: MedplumClient's raw uploads (createBinary, createAttachment
// with a securityContext, createMedia) and download, and fhir-kit-client, which speaks FHIR JSON only.
import { createReference, MedplumClient } from '@medplum/core';
import { Client } from 'fhir-kit-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { freePort } from '../support/listen.js';
import { ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET } from '../support/app.js';
import { PNG, startBinaryApp, type BinaryApp } from '../support/binary.js';

const bytesOf = async (blob: Blob): Promise<Buffer> => Buffer.from(await blob.arrayBuffer());

describe.each(testDatabases())('Binary through third-party clients on $name', (database) => {
  let s: BinaryApp;
  let base: string;
  let medplum: MedplumClient;
  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}/`;
    s = await startBinaryApp(database, { baseUrl: base });
    await s.t.app.listen({ port, host: '127.0.0.1' });
    medplum = new MedplumClient({ baseUrl: base, fetch, clientId: ADMIN_CLIENT_ID });
    await medplum.startClientLogin(ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET);
  });
  afterAll(async () => s?.close());

  it('MedplumClient createBinary uploads raw bytes; download and readResource get them back', async () => {
    const binary = await medplum.createBinary({ data: PNG, contentType: 'image/png', filename: 'dot.png' });
    expect(binary).toMatchObject({
      resourceType: 'Binary',
      contentType: 'image/png',
      url: `Binary/${binary.id}`,
    });
    const blob = await medplum.download(`Binary/${binary.id}`);
    expect(blob.type).toBe('image/png');
    expect((await bytesOf(blob)).equals(PNG)).toBe(true);
    const read = await medplum.readResource('Binary', binary.id);
    expect(Buffer.from(read.data as string, 'base64').equals(PNG)).toBe(true);
  });

  it('MedplumClient createAttachment (with a securityContext) feeds a DocumentReference; createMedia too', async () => {
    const patient = await medplum.createResource({ resourceType: 'Patient', name: [{ family: 'Attach' }] });
    const text = 'a clinical note\n';
    const attachment = await medplum.createAttachment({
      data: text,
      contentType: 'text/plain',
      filename: 'note.txt',
      securityContext: createReference(patient),
    });
    expect(attachment).toMatchObject({ contentType: 'text/plain', title: 'note.txt' });
    expect(attachment.url).toMatch(/^Binary\/[A-Za-z0-9-]+$/);
    const binary = await medplum.readResource('Binary', (attachment.url as string).slice('Binary/'.length));
    expect(binary.securityContext).toEqual({ reference: `Patient/${patient.id}` });
    const docRef = await medplum.createResource({
      resourceType: 'DocumentReference',
      status: 'current',
      subject: createReference(patient),
      content: [{ attachment }],
    });
    const again = await medplum.readResource('DocumentReference', docRef.id);
    const url = again.content[0]?.attachment.url as string;
    expect((await bytesOf(await medplum.download(url))).toString('utf8')).toBe(text);
    // Absolute, against the FHIR base, it is the same content.
    const absolute = new URL(url, `${base}fhir/R4/`).href;
    expect((await bytesOf(await medplum.download(absolute))).toString('utf8')).toBe(text);

    const media = await medplum.createMedia({ data: PNG, contentType: 'image/png', filename: 'dot.png' });
    expect(media).toMatchObject({
      resourceType: 'Media',
      status: 'completed',
      content: { contentType: 'image/png' },
    });
    const mediaBinary = await medplum.readResource(
      'Binary',
      (media.content.url as string).slice('Binary/'.length),
    );
    expect(mediaBinary.securityContext).toEqual({ reference: `Media/${media.id}` });
    expect((await bytesOf(await medplum.download(media.content.url as string))).equals(PNG)).toBe(true);
  });

  it('fhir-kit-client creates, reads and updates a Binary in its FHIR JSON form', async () => {
    const client = new Client({ baseUrl: `${base}fhir/R4`, bearerToken: s.t.adminToken });
    const data = Buffer.from('fhir-kit bytes').toString('base64');
    const created = (await client.create({
      resourceType: 'Binary',
      body: { resourceType: 'Binary', contentType: 'text/plain', data },
    })) as unknown as { id: string; data?: string };
    expect(created.id).toBeTruthy();
    expect(created.data).toBeUndefined();
    const read = (await client.read({ resourceType: 'Binary', id: created.id })) as unknown as {
      contentType: string;
      data: string;
    };
    expect(read).toMatchObject({ contentType: 'text/plain', data });
    const next = Buffer.from('second version').toString('base64');
    await client.update({
      resourceType: 'Binary',
      id: created.id,
      body: { resourceType: 'Binary', id: created.id, contentType: 'text/plain', data: next },
    });
    const v1 = (await client.vread({ resourceType: 'Binary', id: created.id, version: '1' })) as unknown as {
      data: string;
    };
    expect(v1.data).toBe(data);
    const raw = await fetch(`${base}fhir/R4/Binary/${created.id}`, {
      headers: { authorization: `Bearer ${s.t.adminToken}` },
    });
    expect(await raw.text()).toBe('second version');
  });
});
