// FHIR XML ↔ JSON mapping (https://hl7.org/fhir/R4/xml.html) and the refusal of hostile XML.
import { describe, expect, it } from 'vitest';
import { parseJson } from '../json/parse.js';
import { stringifyJson } from '../json/stringify.js';
import { FhirError } from '../outcome.js';
import { fromXml, toXml } from './index.js';

const F = 'xmlns="http://hl7.org/fhir"';

function refused(xml: string): FhirError {
  try {
    fromXml(xml);
  } catch (err) {
    expect(err).toBeInstanceOf(FhirError);
    expect((err as FhirError).status).toBe(400);
    return err as FhirError;
  }
  throw new Error('accepted');
}

describe('fromXml', () => {
  it('maps primitives, arrays, id/extension on primitives, choice types, decimals and the narrative', () => {
    const xml = `<?xml version="1.0" encoding="UTF-8"?>
<!-- a comment -->
<Observation ${F}>
  <id value="o1"/>
  <text><status value="generated"/><div xmlns="http://www.w3.org/1999/xhtml"><p>A &amp; B</p></div></text>
  <contained><Patient><id value="p"/><name><given value="A"/><given id="g2"><extension url="http://e"><valueString value="x"/></extension></given></name></Patient></contained>
  <status value="final"/>
  <code><text value="line1&#10;line2 &lt;tag&gt; &quot;q&quot;"/></code>
  <subject><reference value="#p"/></subject>
  <valueQuantity id="q1"><value value="1.50"/><unit value="mg"/></valueQuantity>
  <component><code><text value="c"/></code><valueInteger value="007x"/></component>
  <component><code><text value="d"/></code><valueBoolean value="true"/></component>
</Observation>`;
    const json = fromXml(xml);
    expect(json).toEqual({
      resourceType: 'Observation',
      id: 'o1',
      text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml"><p>A &amp; B</p></div>' },
      contained: [
        {
          resourceType: 'Patient',
          id: 'p',
          name: [
            {
              given: ['A', null],
              _given: [null, { id: 'g2', extension: [{ url: 'http://e', valueString: 'x' }] }],
            },
          ],
        },
      ],
      status: 'final',
      code: { text: 'line1\nline2 <tag> "q"' },
      subject: { reference: '#p' },
      valueQuantity: { id: 'q1', value: 1.5, unit: 'mg' },
      // Not a number: kept as a string, for validation to refuse as it refuses the same JSON.
      component: [
        { code: { text: 'c' }, valueInteger: '007x' },
        { code: { text: 'd' }, valueBoolean: true },
      ],
    });
    expect(stringifyJson(json)).toContain('"value":1.50');
  });

  it('accepts a namespace prefix and xsi attributes', () => {
    const json = fromXml(
      `<f:Patient xmlns:f="http://hl7.org/fhir" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="x"><f:active value="true"/></f:Patient>`,
    );
    expect(json).toEqual({ resourceType: 'Patient', active: true });
  });

  it('refuses a DOCTYPE and entities (XXE, billion laughs) before parsing', () => {
    const xxe = refused(
      `<?xml version="1.0"?><!DOCTYPE p [<!ENTITY x SYSTEM "file:///etc/passwd">]><Patient ${F}><id value="&x;"/></Patient>`,
    );
    expect(xxe.code).toBe('xml.doctype');
    expect(JSON.stringify(xxe.toOutcome())).not.toContain('root:');
    const laughs = `<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>`;
    expect(refused(`${laughs}<Patient ${F}><id value="&lol2;"/></Patient>`).code).toBe('xml.doctype');
    expect(refused(`<Patient ${F}><id value="&lol;"/></Patient>`).code).toBe('xml.entity');
    expect(
      refused(
        `<Patient ${F}><text><status value="generated"/><div xmlns="http://www.w3.org/1999/xhtml">&lol;</div></text></Patient>`,
      ).code,
    ).toBe('xml.malformed');
  });

  it('refuses malformed XML, deep nesting, wrong namespaces, unknown elements and attributes', () => {
    expect(refused(`<Patient ${F}><active value="true"></Patient>`).code).toBe('xml.malformed');
    expect(refused(`<Patient ${F}><active value="true"/></Patient><Patient ${F}/>`).code).toBe(
      'xml.malformed',
    );
    expect(refused('not xml').code).toBe('xml.malformed');
    expect(refused('').code).toBe('xml.malformed');
    const deep = `<Patient ${F}>${'<extension url="u">'.repeat(5000)}${'</extension>'.repeat(5000)}</Patient>`;
    expect(refused(deep).code).toBe('xml.too-deep');
    // Within the XML bound, but deeper than a JSON body may be once each repeating element is an array.
    const wide = `<Patient ${F}>${'<extension url="u">'.repeat(200)}${'</extension>'.repeat(200)}</Patient>`;
    expect(refused(wide).message).toMatch(/Patient\.extension nests deeper than 256 levels/);
    expect(refused('<Patient xmlns="http://example.org"/>').code).toBe('xml.namespace');
    expect(refused('<Patient/>').code).toBe('xml.namespace');
    expect(refused(`<Bogus ${F}/>`).code).toBe('xml.resource-type');
    const unknown = refused(`<Patient ${F}><foo value="1"/></Patient>`);
    expect(unknown.code).toBe('xml.unknown-element');
    expect(unknown.toOutcome().issue[0]).toMatchObject({ expression: ['Patient.foo'] });
    expect(refused(`<Patient ${F}><active value="true" bar="1"/></Patient>`).code).toBe(
      'xml.unknown-attribute',
    );
    expect(refused(`<Patient ${F}><active value="true"/><active value="false"/></Patient>`).code).toBe(
      'xml.repeated',
    );
    expect(refused(`<Patient ${F}><active/></Patient>`).code).toBe('xml.empty');
    expect(refused(`<Patient ${F}>text<active value="true"/></Patient>`).code).toBe('xml.text');
    expect(refused(`<Patient ${F}><text><div><p>x</p></div></text></Patient>`).code).toBe('xml.namespace');
    expect(refused(`<Patient ${F}><id value="&#0;"/></Patient>`).code).toBe('xml.entity');
  });
});

describe('toXml', () => {
  it('writes elements in definition order, ids and urls as attributes, decimals as written', () => {
    const json = parseJson(
      '{"valueQuantity":{"unit":"mg","value":1.50},"status":"final","resourceType":"Observation","code":{"text":"a\\tb"},"extension":[{"valueString":"x","url":"http://e","id":"e1"}]}',
    ) as Record<string, unknown>;
    expect(toXml(json)).toBe(
      '<?xml version="1.0" encoding="UTF-8"?><Observation xmlns="http://hl7.org/fhir">' +
        '<extension id="e1" url="http://e"><valueString value="x"/></extension><status value="final"/>' +
        '<code><text value="a&#9;b"/></code><valueQuantity><value value="1.50"/><unit value="mg"/></valueQuantity>' +
        '</Observation>',
    );
  });

  it('never lets a narrative add elements to the document', () => {
    const div = '<div xmlns="http://www.w3.org/1999/xhtml">x</div><active value="true"/><div>';
    const xml = toXml({ resourceType: 'Patient', text: { status: 'generated', div } });
    expect(xml).not.toContain('<active');
    expect(fromXml(xml)).toEqual({
      resourceType: 'Patient',
      text: { status: 'generated', div: expect.stringContaining('&lt;active') as unknown },
    });
  });

  it('serialises a 1,000-entry searchset quickly', () => {
    const patient = {
      resourceType: 'Patient',
      id: 'p',
      meta: { versionId: '1', lastUpdated: '2024-01-01T00:00:00Z' },
      text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml"><p>Jane Doe</p></div>' },
      identifier: [{ system: 'http://example.org/mrn', value: '123' }],
      name: [{ family: 'Doe', given: ['Jane', 'Q'] }],
      telecom: [{ system: 'phone', value: '555' }],
      birthDate: '1970-01-01',
      address: [{ line: ['1 Main St'], city: 'Town', postalCode: '12345' }],
    };
    const bundle = {
      resourceType: 'Bundle',
      type: 'searchset',
      total: 1000,
      entry: Array.from({ length: 1000 }, (_, i) => ({
        fullUrl: `http://x/Patient/p${i}`,
        resource: { ...patient, id: `p${i}` },
        search: { mode: 'match' },
      })),
    };
    toXml(bundle);
    const start = performance.now();
    const xml = toXml(bundle);
    expect(performance.now() - start).toBeLessThan(500);
    expect(stringifyJson(fromXml(xml))).toBe(stringifyJson(bundle));
  });
});
