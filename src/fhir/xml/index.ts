// FHIR XML (https://hl7.org/fhir/R4/xml.html): the same content as FHIR JSON, read and written here.
export { fromXml, MAX_XML_DEPTH } from './from-xml.js';
export { toXml } from './to-xml.js';
