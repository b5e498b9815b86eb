"""Small word lists for reading patient messages without an LM: clinical terms by kind, relatives, politeness.

Hand-written (no data fitted): the kinds decide how a question is built from a message's clinical focus
("What is causing his <symptom>?", "Why did she need <procedure>?"), and the counts decide which sentence carries
the clinical question.
"""

from __future__ import annotations

import re
from functools import lru_cache

SYMPTOM = "symptom"
CONDITION = "condition"
PROCEDURE = "procedure"
TEST = "test"
DRUG = "drug"
MEASURE = "measure"
BODY = "body"
MODIFIER = "modifier"
HEADS = (SYMPTOM, CONDITION, PROCEDURE, TEST, DRUG, MEASURE)

_TERMS: dict[str, str] = {
    SYMPTOM: """pain pains ache aches aching headache headaches cough coughing fever fevers dizziness dizzy vertigo
        spinning nausea vomiting vomit diarrhea diarrhoea constipation bleeding bleed swelling swollen rash
        fatigue tired exhausted weakness weak confusion confused delirium delirious disorientated disoriented
        hallucinating hallucinations agitated agitation seizure seizures fit fits convulsion convulsions palpitations
        breathlessness jaundice itching numbness numb tingling fainting faint syncope lightheadedness lightheaded
        depression depressed anxiety anxious panic insomnia bloating bloated cramps cramping stiffness stiff limp
        tremor tremors shaking shakey shaky irritated irritability delusions fog sweating chills sore soreness
        wheezing edema tightness discomfort bruising collapse unconscious forgetful irritable
        nauseous nauseated exhaustion""",
    CONDITION: """cancer tumor tumour tumors mass cyst cysts infection infections pneumonia sepsis septic septicemia
        stroke strokes clot clots embolism aneurysm fracture fractures concussion hemorrhage haemorrhage ulcer hernia
        hernias stones stone lupus fibromyalgia amyloidosis meningitis encephalopathy dementia alzheimers epilepsy
        asthma copd afib arrhythmia dysrhythmia dysrhythmias cardiomegaly angina cad aki overdose dependence
        addiction hepatitis hep hiv covid flu anemia anaemia hyperthyroidism hypothyroidism hyponatremia hypoglycemia
        hypothermia dehydration injury injuries accident abscess polyp polyps shadow lesion lesions spondylolisthesis stenosis
        palsy neuralgia withdrawal toxicity poisoning poison perforation perforations obstruction diabetes diabetic
        hypertension cirrhosis failure relapse recovery damage sludge typhlitis infertile infertility disease
        disorder syndrome virus tuberculosis inflammation
        deficiency cardiomyopathy malfunction bronchopneumonia cholangiocarcinoma metastatic metastasis
        hyperplasticity genotype hemorrhoids migraine gout""",
    PROCEDURE: """surgery surgeries operation op transplant replacement stent stents stint catheterization cath
        angioplasty angioplast ercp dialysis transfusion intubation intubated ventilator
        ventilation resuscitation
        resuscitated chemo chemotherapy radiation iodine bypass amputation pacemaker puncture drain tube procedure
        treatment therapy colostomy ligation removal repair ablation cardioversion induction""",
    TEST: """ct scan scans mri x-ray xray ultrasound echo echocardiogram ekg ecg eeg eus tests test urinalysis bloodwork
        sonography biopsy endoscopy colonoscopy""",
    DRUG: """antibiotics antibiotic morphine aspirin asa warfarin coumadin lasix furosemide insulin steroids
        steroid prednisone haldol keppra lamictal ativan nardil metronidazole sevelamer lactulose oxycodone opioid
        opioids narcotics sedative sedatives sedated medication medications medicine medicines meds pills pill
        syrup antiviral levothyroxine omeprazole atenolol tylenol acetaminophen ibuprofen eliquis thinner thinners
        antiarrhythmic udiliv azithromycin painkillers dose dosage drugs drug bisoprolol valsartan amlodipine
        tamsulosin nitropatch dicyclomine sumatriptan thorazine trihexyphenidyl cocaine injection injections
        injected shots shot iron oxygen""",
    MEASURE: """troponin potassium ammonia sodium hct hematocrit hemoglobin haemoglobin wbc platelet platelets
        b12 creatinine creatine sugar glucose cholesterol enzymes saturation temperature""",
    BODY: """heart lung lungs kidney kidneys liver brain spleen bowel bowels stomach abdomen abdominal chest
        leg legs arm arms hand hands foot feet hip hips knee knees spine spinal neck head eye eyes mouth throat skin
        ankle ankles elbow elbows rib ribs toe toes finger fingers jaw ear ears nose tongue gums teeth tooth rectum
        groin pelvis thigh calf shin face forehead
        blood bladder prostate testicle testicles ovary ovaries uterus pancreas pancreatic gallbladder colon wound
        valve vein veins artery arteries nerve nerves lip lips cheek cheeks thyroid bone bones muscle muscles wrist
        wrists shoulder shoulders hepatic renal cardiac pulmonary respiratory urinary gastrointestinal intestinal
        bloodstream memory breathing breath rate pressure level levels count vessel hilar lobe disc discs
        temple vision joints joint""",
    MODIFIER: """severe chronic acute persistent recurrent high low elevated increased decreased rapid left right lower
        upper enlarged abnormal dangerously mild massive bloody dry watery mini multiple intense excruciating
        terrible sudden new constant continuous sharp dull tearing irregular slow fast white red heavy internal
        mental post-viral worsening worse viral bacterial fungal""",
}

# Multi-word terms read as one (the longest match wins); each maps to its kind.
_PHRASES: dict[str, str] = {
    "shortness of breath": SYMPTOM, "short of breath": SYMPTOM, "difficulty in breathing": SYMPTOM,
    "difficulty breathing": SYMPTOM, "chest pain": SYMPTOM, "back pain": SYMPTOM, "abdominal pain": SYMPTOM,
    "stomach pain": SYMPTOM, "memory loss": SYMPTOM, "weight loss": SYMPTOM, "loosing weight": SYMPTOM,
    "losing weight": SYMPTOM, "losing strength": SYMPTOM, "loose motions": SYMPTOM, "passed out": SYMPTOM,
    "mood swings": SYMPTOM, "not eating": SYMPTOM, "blood pressure": MEASURE, "heart rate": MEASURE,
    "white blood cell": MEASURE, "oxygen saturation": MEASURE, "heart attack": CONDITION,
    "cardiac arrest": CONDITION, "kidney failure": CONDITION, "renal failure": CONDITION,
    "liver failure": CONDITION, "heart failure": CONDITION, "blood clot": CONDITION, "kidney stones": CONDITION,
    "atrial fibrillation": CONDITION, "blood poisoning": CONDITION, "thyroid storm": CONDITION,
    "heart problem": CONDITION, "brain damage": CONDITION, "brain tumor": CONDITION, "brain cancer": CONDITION,
    "hip replacement": PROCEDURE, "ct scan": TEST, "cat scan": TEST, "catscan": TEST,
    "breathing tube": PROCEDURE, "breathing machine": PROCEDURE, "chest tube": PROCEDURE,
    "lumbar puncture": PROCEDURE, "blood test": TEST, "blood work": TEST, "radioactive iodine": PROCEDURE,
    "cardiac catheterization": PROCEDURE, "kidney transplant": PROCEDURE, "back surgery": PROCEDURE,
    "lower back": BODY, "upper back": BODY, "my back": BODY, "his back": BODY, "her back": BODY,
    "blood thinner": DRUG, "blood thinners": DRUG, "pain meds": DRUG, "pain killers": DRUG,
}

_SUFFIX_KINDS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(itis|osis|emia|aemia|oma|pathy|algia|plegia|penia|cytosis|trophy|uria|rrhea|rrhoea)$"),
     CONDITION),
    (re.compile(r"(ectomy|otomy|ostomy|plasty)$"), PROCEDURE),
    (re.compile(r"(graphy|gram|scopy|centesis)$"), TEST),
    (re.compile(r"(cillin|mycin|floxacin|prazole|olol|pril|sartan|statin|dipine|azepam|oxacin|vir|mab|parin)$"),
     DRUG),
]

_WORD_KIND: dict[str, str] = {w: kind for kind, words in _TERMS.items() for w in words.split()}
_MAX_PHRASE = max(len(p.split()) for p in _PHRASES)
_PHRASE_STARTS = {p.split()[0] for p in _PHRASES}
# Words that name a symptom, condition, procedure, test, drug or measurement (not body parts or modifiers).
WORDS_OF_KINDS = frozenset(w for w, kind in _WORD_KIND.items() if kind in HEADS)
# Heads that name no particular thing: "kindly suggest treatment" asks nothing clinical by itself.
WEAK = {"treatment", "therapy", "procedure", "medication", "medications", "medicine", "medicines", "meds", "pill",
        "pills", "drug", "drugs", "dose", "dosage", "test", "tests", "disease", "disorder", "damage", "recovery",
        "tube", "scan", "scans", "op"}
# Misspellings are common in patient messages ("conciousness", "catherization"): a word of 7+ letters one
# deletion, insertion, substitution or swap away from a listed word (of 7+ letters) takes that word's kind.
_FUZZY_MIN = 7


def _deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1:] for i in range(len(word))}


_DELETION_INDEX: dict[str, str] = {}
for _w in sorted(_WORD_KIND, reverse=True):
    if len(_w) >= _FUZZY_MIN and _w.isalpha():
        _near = _deletions(_w) | {_w}
        if len(_w) >= 10:      # long words: two letters dropped too ("catherization")
            _near |= {d2 for d in _near for d2 in _deletions(d)}
        for _d in _near:
            _DELETION_INDEX.setdefault(_d, _w)


@lru_cache(maxsize=8192)
def _fuzzy(word: str) -> str | None:
    if len(word) < _FUZZY_MIN or not word.isalpha():
        return None
    if word in _DELETION_INDEX:
        return _DELETION_INDEX[word]
    for d in _deletions(word):
        if d in _DELETION_INDEX:
            return _DELETION_INDEX[d]
    return None


@lru_cache(maxsize=8192)
def word_kind(word: str) -> str | None:
    """The clinical kind of one word, by list, then medical suffix, then a near spelling; None for everyday words."""
    w = word.strip(".,;:!?()\"'").lower()
    if w.endswith("'s"):
        w = w[:-2]
    if w in _WORD_KIND:
        return _WORD_KIND[w]
    if len(w) > 5:
        for pattern, kind in _SUFFIX_KINDS:
            if pattern.search(w):
                return kind
    near = _fuzzy(w)
    return _WORD_KIND[near] if near else None


def tag_words(words: list[str]) -> list[str | None]:
    """Kind per word; a multi-word term tags each of its words with the term's kind."""
    lowered = [w.strip(".,;:!?()\"'").lower() for w in words]
    kinds = [word_kind(w) for w in words]
    i = 0
    while i < len(words):
        if lowered[i] not in _PHRASE_STARTS:
            i += 1
            continue
        for n in range(min(_MAX_PHRASE, len(words) - i), 1, -1):
            kind = _PHRASES.get(" ".join(lowered[i:i + n]))
            if kind:
                kinds[i:i + n] = [kind] * n
                i += n - 1
                break
        i += 1
    return kinds


def clinical_count(text: str) -> int:
    """How many words of `text` name a particular symptom, condition, procedure, test, drug or measurement."""
    words = text.split()
    return sum(1 for w, k in zip(words, tag_words(words), strict=True)
               if k in HEADS and canonical(w.strip(".,;:!?()\"'")).lower() not in WEAK)


# Symptoms written as adjectives or verbs, named as a clinician names them.
AS_NOUN = {"weak": "weakness", "confused": "confusion", "dizzy": "dizziness", "swollen": "swelling",
           "delirious": "delirium", "shakey": "shakiness", "shaky": "shakiness", "tired": "fatigue",
           "numb": "numbness", "irritated": "irritability", "irritable": "irritability", "anxious": "anxiety",
           "depressed": "depression", "faint": "fainting", "stiff": "stiffness", "bloated": "bloating",
           "nauseous": "nausea", "nauseated": "nausea", "exhausted": "exhaustion", "agitated": "agitation",
           "lightheaded": "lightheadedness", "disorientated": "disorientation", "disoriented": "disorientation",
           "hallucinating": "hallucinations", "septic": "sepsis", "diabetic": "diabetes", "forgetful":
           "forgetfulness", "short of breath": "shortness of breath", "coughing": "cough", "sore": "soreness",
           "unconscious": "unconsciousness", "intubated": "intubation", "sedated": "sedation",
           "resuscitated": "resuscitation", "infertile": "infertility", "bled": "bleeding",
           "passed out": "fainting", "losing weight": "weight loss", "loosing weight": "weight loss",
           "losing strength": "loss of strength", "overdosed": "overdose", "vomitting": "vomiting"}

# Conditions that happen at a time, so a question can say "after" them ("after the overdose").
EVENT_HEADS = {"overdose", "accident", "fall", "attack", "stroke", "strokes", "arrest", "injury", "injuries",
               "sepsis", "septicemia", "pneumonia", "meningitis", "seizure", "collapse", "fracture", "concussion",
               "delivery", "birth", "hemorrhage", "bleed", "infection", "transplant", "bronchopneumonia"}


def canonical(word: str) -> str:
    """A misspelled clinical word in its listed spelling ('jaundise' -> 'jaundice'); other words unchanged."""
    w = word.lower()
    if w in _WORD_KIND or len(w) < _FUZZY_MIN:
        return word
    near = _fuzzy(w)
    return near if near else word


# --- who the message is about ----------------------------------------------------------------------------------
MALE_RELATIVES = {"father", "dad", "daddy", "papa", "husband", "son", "brother", "grandfather", "grandpa", "uncle",
                  "nephew", "boyfriend", "fiance", "brother-in-law", "father-in-law", "stepfather", "stepson",
                  "grandson"}
FEMALE_RELATIVES = {"mother", "mom", "mum", "mommy", "mama", "wife", "daughter", "sister", "grandmother", "grandma",
                    "granny", "aunt", "niece", "girlfriend", "fiancee", "sister-in-law", "mother-in-law",
                    "stepmother", "stepdaughter", "granddaughter"}
NEUTRAL_RELATIVES = {"friend", "partner", "child", "baby", "kid", "parent", "cousin", "relative", "neighbor",
                     "neighbour", "spouse", "sibling", "grandchild", "patient", "colleague", "roommate"}
RELATIVES = MALE_RELATIVES | FEMALE_RELATIVES | NEUTRAL_RELATIVES

# Words that say the writer is the patient and which sex (the message's own words, never a guess from names).
WRITER_MALE = re.compile(r"\b(?:i am|i'm|im) an? (?:\d+ ?(?:yr|year|yrs|years)?[- ]?(?:old)? )?(?:male|man|guy)\b"
                         r"|\b(?:asthmatic|healthy|diabetic|year old|yr old) male\b|\bmy (?:testicles?|prostate|penis|wife|"
                         r"girlfriend)\b",
                         re.I)
WRITER_FEMALE = re.compile(r"\b(?:i am|i'm|im) an? (?:\d+ ?(?:yr|year|yrs|years)?[- ]?(?:old)? )?(?:female|woman|"
                           r"lady|girl)\b|\b(?:healthy|diabetic|year old|yr old) female\b|\bmy (?:(?:right|left) )?"
                           r"(?:ovary|ovaries|uterus|husband|boyfriend|period|pregnancy)\b"
                           r"|\bI (?:was|am|'m) (?:\d+ weeks )?pregnant\b|\bdelivered (?:my )?baby"
                           r"|\b(?:had|delivered) my (?:baby|son|daughter)|\bc-section\b",
                           re.I)

# --- politeness and requests that carry no clinical content ----------------------------------------------------
THANKS = re.compile(r"\b(?:thanks?|thankyou|thanx|thx|thnx|appreciate[ds]?|grateful|god bless|blessings)\b", re.I)
# "Doctor advised ERCP" is no greeting: a bare title greets only when a comma or stop follows it.
GREETING = re.compile(r"^(?:(?:hi+|hello|hey|hai|greetings|good (?:morning|evening|afternoon|day)|dear "
                      r"(?:doctor|dr|sir|madam|all)|respected (?:doctor|sir))\b[\s,.!:-]*"
                      r"(?:(?:there|doctor|dr|sir|madam|all|everyone)\b[\s,.!:-]*)?|(?:sir|madam|dr|doctor)\s*[,.!:]+\s*)",
                      re.I)
SIGN_OFF = re.compile(r"\b(?:awaiting|waiting for your|do reply|reply (?:me )?asap|asap|please (?:help|advi[cs]e|"
                      r"reply|respond|answer)|kindly (?:help|advi[cs]e|reply|clear)|any (?:other )?advi[cs]e|"
                      r"need your (?:valuable )?(?:answer|advice|help)|valuable answer|your time|help me out|"
                      r"best regards|regards|sincerely|below is the case|clear my worries|can you help|"
                      r"please (?:&|and) advi[cs]e)\b", re.I)
