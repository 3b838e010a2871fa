// HL7 R4 examples, part 1 of 2 (test/support/hl7-examples.ts).
import { describeExamples } from '../support/hl7-examples.js';

describeExamples(0, 2);
