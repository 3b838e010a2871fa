// The search parameters whose absence migration 028 records (sp_missing.absent), one line per resource type: the
// type, then its parameters' codes. A parameter's id is its position in this text, counting from 1 (line by line,
// left to right): the `id` of sp_param_ids and the elements of sp_missing.absent. Frozen with migration 028: ids are
// never renumbered. A parameter added later is appended (a new line at the end) by a new migration that inserts its
// sp_param_ids row and backfills sp_missing; until then, `:missing`/`:not` on it keep the plan without the index.
// Generated from the built-in registry (search/extract.ts indexedParamsOf) of this version.
export const PARAM_CODES = `
Account _profile _security _source _tag identifier name owner patient period status subject type
ActivityDefinition _profile _security _source _tag composed-of context context-quantity context-type date depends-on derived-from description effective identifier jurisdiction name predecessor publisher status successor title topic url version
AdverseEvent _profile _security _source _tag actuality category date event location recorder resultingcondition seriousness severity study subject substance
AllergyIntolerance _profile _security _source _tag asserter category clinical-status code criticality date identifier last-date manifestation onset patient recorder route severity type verification-status
Appointment _profile _security _source _tag actor appointment-type based-on date identifier location part-status patient practitioner reason-code reason-reference service-category service-type slot specialty status supporting-info
AppointmentResponse _profile _security _source _tag actor appointment identifier location part-status patient practitioner
AsyncJob _profile _security _source _tag type status
AuditEvent _profile _security _source _tag action address agent agent-name agent-role altid date entity entity-name entity-role entity-type outcome patient policy site source subtype type
Basic _profile _security _source _tag author code created identifier patient subject
Binary _profile _security _source _tag
BiologicallyDerivedProduct _profile _security _source _tag
BodyStructure _profile _security _source _tag identifier location morphology patient
Bundle _profile _security _source _tag composition identifier message timestamp type
CapabilityStatement _profile _security _source _tag context context-quantity context-type date description fhirversion format guide jurisdiction mode name publisher resource resource-profile security-service software status supported-profile title url version
CarePlan _profile _security _source _tag date identifier patient activity-code activity-date activity-reference based-on care-team category condition encounter goal instantiates-canonical instantiates-uri intent part-of performer replaces status subject
CareTeam _profile _security _source _tag date identifier patient category encounter participant status subject
CatalogEntry _profile _security _source _tag
ChargeItem _profile _security _source _tag account code context entered-date enterer factor-override identifier occurrence patient performer-actor performer-function performing-organization price-override quantity requesting-organization service subject
ChargeItemDefinition _profile _security _source _tag context context-quantity context-type date description effective identifier jurisdiction publisher status title url version
Claim _profile _security _source _tag care-team created detail-udi encounter enterer facility identifier insurer item-udi patient payee priority procedure-udi provider status subdetail-udi use
ClaimResponse _profile _security _source _tag created disposition identifier insurer outcome patient payment-date request requestor status use
ClientApplication _profile _security _source _tag name
ClinicalImpression _profile _security _source _tag date patient assessor encounter finding-code finding-ref identifier investigation previous problem status subject supporting-info
CodeSystem _profile _security _source _tag context context-quantity context-type date description jurisdiction name publisher status title url version code content-mode identifier language supplements system
Communication _profile _security _source _tag based-on category encounter identifier instantiates-canonical instantiates-uri medium part-of patient received recipient sender sent status subject
CommunicationRequest _profile _security _source _tag authored based-on category encounter group-identifier identifier medium occurrence patient priority recipient replaces requester sender status subject
CompartmentDefinition _profile _security _source _tag context context-quantity context-type date description name publisher status url version code resource
Composition _profile _security _source _tag date identifier patient type attester author category confidentiality context encounter entry period related-id related-ref section status subject title
ConceptMap _profile _security _source _tag context context-quantity context-type date description jurisdiction name publisher status title url version identifier dependson other product source source-code source-system source-uri target target-code target-system target-uri
Condition _profile _security _source _tag code identifier patient abatement-age abatement-date abatement-string asserter body-site category clinical-status encounter evidence evidence-detail onset-age onset-date onset-info recorded-date severity stage subject verification-status
Consent _profile _security _source _tag date identifier patient action actor category consentor data organization period purpose scope security-label source-reference status
Contract _profile _security _source _tag authority domain identifier instantiates issued patient signer status subject url
Coverage _profile _security _source _tag beneficiary class-type class-value dependent identifier patient payor policy-holder status subscriber type
CoverageEligibilityRequest _profile _security _source _tag created enterer facility identifier patient provider status
CoverageEligibilityResponse _profile _security _source _tag created disposition identifier insurer outcome patient request requestor status
DetectedIssue _profile _security _source _tag identifier patient author code identified implicated status
Device _profile _security _source _tag device-name identifier location manufacturer model organization patient status type udi-carrier udi-di url
DeviceDefinition _profile _security _source _tag identifier parent type classification
DeviceMetric _profile _security _source _tag category identifier parent source type
DeviceRequest _profile _security _source _tag code identifier patient encounter authored-on based-on device event-date group-identifier instantiates-canonical instantiates-uri insurance intent performer prior-request requester status subject
DeviceUseStatement _profile _security _source _tag patient device identifier subject
DiagnosticReport _profile _security _source _tag code date identifier patient encounter based-on category conclusion issued media performer result results-interpreter specimen status subject
DocumentManifest _profile _security _source _tag identifier patient type author created description item recipient related-id related-ref source status subject
DocumentReference _profile _security _source _tag identifier patient type encounter authenticator author category contenttype custodian date description event facility format language location period related relatesto relation security-label setting status subject
EffectEvidenceSynthesis _profile _security _source _tag context context-quantity context-type date description effective identifier jurisdiction name publisher status title url version
Encounter _profile _security _source _tag date identifier patient type account appointment based-on class diagnosis episode-of-care length location location-period part-of participant participant-type practitioner reason-code reason-reference service-provider special-arrangement status subject
Endpoint _profile _security _source _tag connection-type identifier name organization payload-type status
EnrollmentRequest _profile _security _source _tag identifier patient status subject
EnrollmentResponse _profile _security _source _tag identifier request status
EpisodeOfCare _profile _security _source _tag date identifier patient type care-manager condition incoming-referral organization status
EventDefinition _profile _security _source _tag composed-of context context-quantity context-type date depends-on derived-from description effective identifier jurisdiction name predecessor publisher status successor title topic url version
Evidence _profile _security _source _tag composed-of context context-quantity context-type date depends-on derived-from description effective identifier jurisdiction name predecessor publisher status successor title topic url version
EvidenceVariable _profile _security _source _tag composed-of context context-quantity context-type date depends-on derived-from description effective identifier jurisdiction name predecessor publisher status successor title topic url version
ExampleScenario _profile _security _source _tag context context-quantity context-type date identifier jurisdiction name publisher status url version
ExplanationOfBenefit _profile _security _source _tag care-team claim coverage created detail-udi disposition encounter enterer facility identifier item-udi patient payee procedure-udi provider status subdetail-udi
FamilyMemberHistory _profile _security _source _tag code date identifier patient instantiates-canonical instantiates-uri relationship sex status
Flag _profile _security _source _tag date patient encounter author identifier subject
Goal _profile _security _source _tag identifier patient achievement-status category lifecycle-status start-date subject target-date
GraphDefinition _profile _security _source _tag context context-quantity context-type date description jurisdiction name publisher status url version start
Group _profile _security _source _tag actual characteristic code exclude identifier managing-entity member type value
GuidanceResponse _profile _security _source _tag identifier patient request subject
HealthcareService _profile _security _source _tag active characteristic coverage-area endpoint identifier location name organization program service-category service-type specialty
ImagingStudy _profile _security _source _tag identifier patient basedon bodysite dicom-class encounter endpoint instance interpreter modality performer reason referrer series started status subject
Immunization _profile _security _source _tag date identifier patient location lot-number manufacturer performer reaction reaction-date reason-code reason-reference series status status-reason target-disease vaccine-code
ImmunizationEvaluation _profile _security _source _tag date dose-status identifier immunization-event patient status target-disease
ImmunizationRecommendation _profile _security _source _tag date identifier information patient status support target-disease vaccine-type
ImplementationGuide _profile _security _source _tag context context-quantity context-type date description jurisdiction name publisher status title url version depends-on experimental global resource
InsurancePlan _profile _security _source _tag address address-city address-country address-postalcode address-state address-use administered-by endpoint identifier name owned-by phonetic status type
Invoice _profile _security _source _tag account date identifier issuer participant participant-role patient recipient status subject totalgross totalnet type
Library _profile _security _source _tag composed-of content-type context context-quantity context-type date depends-on derived-from description effective identifier jurisdiction name predecessor publisher status successor title topic type url version
Linkage _profile _security _source _tag author item source
List _profile _security _source _tag code date identifier patient encounter empty-reason item notes source status subject title
Location _profile _security _source _tag address address-city address-country address-postalcode address-state address-use endpoint identifier name operational-status organization partof status type
Login _profile _security _source _tag user code cookie
Measure _profile _security _source _tag composed-of context context-quantity context-type date depends-on derived-from description effective identifier jurisdiction name predecessor publisher status successor title topic url version
MeasureReport _profile _security _source _tag date evaluated-resource identifier measure patient period reporter status subject
Media _profile _security _source _tag based-on created device encounter identifier modality operator patient site status subject type view
Medication _profile _security _source _tag code expiration-date form identifier ingredient ingredient-code lot-number manufacturer status
MedicationAdministration _profile _security _source _tag code identifier patient context device effective-time medication performer reason-given reason-not-given request status subject
MedicationDispense _profile _security _source _tag code identifier patient medication status context destination performer prescription receiver responsibleparty subject type whenhandedover whenprepared
MedicationKnowledge _profile _security _source _tag classification classification-type code doseform ingredient ingredient-code manufacturer monitoring-program-name monitoring-program-type monograph monograph-type source-cost status
MedicationRequest _profile _security _source _tag code identifier patient medication status authoredon category date encounter intended-dispenser intended-performer intended-performertype intent priority requester subject
MedicationStatement _profile _security _source _tag code identifier patient medication status category context effective part-of source subject
MedicinalProduct _profile _security _source _tag identifier name name-language
MedicinalProductAuthorization _profile _security _source _tag country holder identifier status subject
MedicinalProductContraindication _profile _security _source _tag subject
MedicinalProductIndication _profile _security _source _tag subject
MedicinalProductIngredient _profile _security _source _tag
MedicinalProductInteraction _profile _security _source _tag subject
MedicinalProductManufactured _profile _security _source _tag
MedicinalProductPackaged _profile _security _source _tag identifier subject
MedicinalProductPharmaceutical _profile _security _source _tag identifier route target-species
MedicinalProductUndesirableEffect _profile _security _source _tag subject
MessageDefinition _profile _security _source _tag context context-quantity context-type date description jurisdiction name publisher status title url version identifier category event focus parent
MessageHeader _profile _security _source _tag author code destination destination-uri enterer event focus receiver response-id responsible sender source source-uri target
MolecularSequence _profile _security _source _tag chromosome identifier patient referenceseqid type variant-end variant-start window-end window-start
NamingSystem _profile _security _source _tag context context-quantity context-type date description jurisdiction name publisher status contact id-type kind period responsible telecom type value
NutritionOrder _profile _security _source _tag identifier patient encounter additive datetime formula instantiates-canonical instantiates-uri oraldiet provider status supplement
Observation _profile _security _source _tag code date identifier patient encounter based-on category combo-code combo-data-absent-reason combo-value-concept combo-value-quantity component-code component-data-absent-reason component-value-concept component-value-quantity data-absent-reason derived-from device focus has-member method part-of performer specimen status subject value-concept value-date value-quantity value-string
ObservationDefinition _profile _security _source _tag
OperationDefinition _profile _security _source _tag context context-quantity context-type date description jurisdiction name publisher status title url version base code input-profile instance kind output-profile system type
OperationOutcome _profile _security _source _tag
Organization _profile _security _source _tag active address address-city address-country address-postalcode address-state address-use endpoint identifier name partof phonetic type
OrganizationAffiliation _profile _security _source _tag active date email endpoint identifier location network participating-organization phone primary-organization role service specialty telecom
Parameters _profile _security _source _tag
Patient _profile _security _source _tag active address address-city address-country address-postalcode address-state address-use birthdate death-date deceased email family gender general-practitioner given identifier language link name organization phone phonetic telecom
PaymentNotice _profile _security _source _tag created identifier payment-status provider request response status
PaymentReconciliation _profile _security _source _tag created disposition identifier outcome payment-issuer request requestor status
Person _profile _security _source _tag address address-city address-country address-postalcode address-state address-use birthdate email gender phone phonetic telecom identifier link name organization patient practitioner relatedperson
PlanDefinition _profile _security _source _tag composed-of context context-quantity context-type date definition depends-on derived-from description effective identifier jurisdiction name predecessor publisher status successor title topic type url version
Practitioner _profile _security _source _tag address address-city address-country address-postalcode address-state address-use email family gender given phone phonetic telecom active communication identifier name
PractitionerRole _profile _security _source _tag email phone telecom active date endpoint identifier location organization practitioner role service specialty
Procedure _profile _security _source _tag code date identifier patient encounter based-on category instantiates-canonical instantiates-uri location part-of performer reason-code reason-reference status subject
Project _profile _security _source _tag identifier name owner google-client-id recaptcha-site-key
ProjectMembership _profile _security _source _tag project user profile profile-type user-name external-id access-policy identifier
Provenance _profile _security _source _tag agent agent-role agent-type entity location patient recorded signature-type target when
Questionnaire _profile _security _source _tag code context context-quantity context-type date definition description effective identifier jurisdiction name publisher status subject-type title url version
QuestionnaireResponse _profile _security _source _tag author authored based-on encounter identifier part-of patient questionnaire source status subject
RelatedPerson _profile _security _source _tag address address-city address-country address-postalcode address-state address-use birthdate email gender phone phonetic telecom active identifier name patient relationship
RequestGroup _profile _security _source _tag author authored code encounter group-identifier identifier instantiates-canonical instantiates-uri intent participant patient priority status subject
ResearchDefinition _profile _security _source _tag composed-of context context-quantity context-type date depends-on derived-from description effective identifier jurisdiction name predecessor publisher status successor title topic url version
ResearchElementDefinition _profile _security _source _tag composed-of context context-quantity context-type date depends-on derived-from description effective identifier jurisdiction name predecessor publisher status successor title topic url version
ResearchStudy _profile _security _source _tag category date focus identifier keyword location partof principalinvestigator protocol site sponsor status title
ResearchSubject _profile _security _source _tag date identifier individual patient status study
RiskAssessment _profile _security _source _tag date identifier patient encounter condition method performer probability risk subject
RiskEvidenceSynthesis _profile _security _source _tag context context-quantity context-type date description effective identifier jurisdiction name publisher status title url version
Schedule _profile _security _source _tag active actor date identifier service-category service-type specialty
SearchParameter _profile _security _source _tag context context-quantity context-type date description jurisdiction name publisher status url version base code component derived-from target type
ServiceRequest _profile _security _source _tag code identifier patient encounter authored based-on body-site category instantiates-canonical instantiates-uri intent occurrence order-detail performer performer-type priority replaces requester requisition specimen status subject
Slot _profile _security _source _tag appointment-type identifier schedule service-category service-type specialty start status
Specimen _profile _security _source _tag accession bodysite collected collector container container-id identifier parent patient status subject type
SpecimenDefinition _profile _security _source _tag container identifier type
StructureDefinition _profile _security _source _tag context context-quantity context-type date description jurisdiction name publisher status title url version identifier abstract base base-path derivation experimental ext-context keyword kind path type valueset
StructureMap _profile _security _source _tag context context-quantity context-type date description jurisdiction name publisher status title url version identifier
Subscription _profile _security _source _tag contact criteria payload status type url
SubscriptionTopic _profile _security _source _tag date identifier status title url version derived-or-self effective event resource trigger-description
Substance _profile _security _source _tag category code container-identifier expiry identifier quantity status substance-reference
SubstanceNucleicAcid _profile _security _source _tag
SubstancePolymer _profile _security _source _tag
SubstanceProtein _profile _security _source _tag
SubstanceReferenceInformation _profile _security _source _tag
SubstanceSourceMaterial _profile _security _source _tag
SubstanceSpecification _profile _security _source _tag code
SupplyDelivery _profile _security _source _tag identifier patient receiver status supplier
SupplyRequest _profile _security _source _tag date identifier category requester status subject supplier
Task _profile _security _source _tag authored-on based-on business-status code encounter focus group-identifier identifier intent modified owner part-of patient performer period priority requester status subject
TerminologyCapabilities _profile _security _source _tag context context-quantity context-type date description jurisdiction name publisher status title url version
TestReport _profile _security _source _tag identifier issued participant result tester testscript
TestScript _profile _security _source _tag context context-quantity context-type date description identifier jurisdiction name publisher status testscript-capability title url version
User _profile _security _source _tag identifier email external-id project
ValueSet _profile _security _source _tag context context-quantity context-type date description jurisdiction name publisher status title url version identifier code expansion reference
VerificationResult _profile _security _source _tag target
ViewDefinition _profile _security _source _tag name url status resource
VisionPrescription _profile _security _source _tag identifier patient encounter datewritten prescriber status
`;

/** `[id, resource type, code]` of every parameter of PARAM_CODES. */
export function paramIds(text: string = PARAM_CODES): [number, string, string][] {
  const out: [number, string, string][] = [];
  for (const line of text.split('\n')) {
    const [type, ...codes] = line.trim().split(/\s+/);
    if (!type) continue;
    for (const code of codes) out.push([out.length + 1, type, code]);
  }
  return out;
}
