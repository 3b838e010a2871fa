// Realistic synthetic Patients for the benchmark: names, identifiers, addresses, telecom, birth dates.
const FAMILIES = ['Smith', 'Johnson', 'Williams', 'Brown', 'Jones', 'Garcia', 'Miller', 'Davis', 'Rodriguez', 'Martinez', 'Hernandez', 'Lopez', 'Gonzalez', 'Wilson', 'Anderson', 'Thomas', 'Taylor', 'Moore', 'Jackson', 'Martin', 'Lee', 'Perez', 'Thompson', 'White', 'Harris', 'Sanchez', 'Clark', 'Ramirez', 'Lewis', 'Robinson', 'Walker', 'Young', 'Allen', 'King', 'Wright', 'Scott', 'Torres', 'Nguyen', 'Hill', 'Flores', 'Green', 'Adams', 'Nelson', 'Baker', 'Hall', 'Rivera', 'Campbell', 'Mitchell', 'Carter', 'Roberts', 'Müller', 'Schmidt', 'Schneider', 'Fischer', 'Weber', 'Meyer', 'Wagner', 'Becker', 'Schulz', 'Hoffmann', 'Dubois', 'Durand', 'Lefebvre', 'Moreau', 'Laurent', 'Simon', 'Michel', 'García', 'Fernández', 'González', 'Rossi', 'Russo', 'Ferrari', 'Esposito', 'Bianchi', 'Romano', 'Colombo', 'Ricci', 'Marino', 'Greco', 'Kowalski', 'Nowak', 'Wiśniewski', 'Wójcik', 'Kowalczyk', 'Kamiński', 'Tanaka', 'Suzuki', 'Takahashi', 'Watanabe', 'Ito', 'Yamamoto', 'Nakamura', 'Kobayashi', 'Kato', 'Yoshida', 'Yamada', 'Sasaki', 'Yamaguchi', 'Matsumoto'];
const GIVEN = ['James', 'Mary', 'John', 'Patricia', 'Robert', 'Jennifer', 'Michael', 'Linda', 'William', 'Elizabeth', 'David', 'Barbara', 'Richard', 'Susan', 'Joseph', 'Jessica', 'Thomas', 'Sarah', 'Charles', 'Karen', 'Ana', 'José', 'Zoë', 'Noah', 'Emma', 'Liam', 'Olivia', 'Mateo', 'Sofía', 'Hiro'];
const CITIES = [['Springfield', 'IL', '62701'], ['Boston', 'MA', '02108'], ['Austin', 'TX', '73301'], ['Denver', 'CO', '80202'], ['Seattle', 'WA', '98101']] as const;

export function families(): readonly string[] {
  return FAMILIES;
}

export function makePatient(i: number): Record<string, unknown> {
  const family = FAMILIES[i % FAMILIES.length] as string;
  const given = GIVEN[(i * 7) % GIVEN.length] as string;
  const [city, state, zip] = CITIES[i % CITIES.length] as readonly [string, string, string];
  const year = 1930 + (i % 90);
  return {
    resourceType: 'Patient',
    identifier: [{ system: 'urn:oid:2.16.840.1.113883.4.3.25', value: `MRN-${100000 + i}` }],
    active: true,
    name: [{ use: 'official', family, given: [given, i % 3 === 0 ? 'Marie' : 'Lee'], prefix: i % 2 ? ['Mr.'] : ['Ms.'] }],
    telecom: [
      { system: 'phone', value: `555-01${String(i % 100).padStart(2, '0')}`, use: 'home' },
      { system: 'email', value: `${given.toLowerCase()}.${i}@example.org` },
    ],
    gender: i % 2 ? 'male' : 'female',
    birthDate: `${year}-${String((i % 12) + 1).padStart(2, '0')}-${String((i % 28) + 1).padStart(2, '0')}`,
    address: [{ use: 'home', line: [`${1 + (i % 999)} Main St`, `Apt ${1 + (i % 40)}`], city, state, postalCode: zip, country: 'USA' }],
    maritalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', code: i % 2 ? 'M' : 'S' }] },
  };
}
