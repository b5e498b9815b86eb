"""Clinical vocabulary, hand-written: drugs, tests, procedures and their lay words. Some terms came from clinprog's
own training cases (a number measured on those flatters them), none from evaluation text. `concepts(text)` merges lay
and clinical synonyms ("blood thinner" and "apixaban" both give `anticoagulant`)."""

from __future__ import annotations

import re
from functools import lru_cache

# --- drugs: name -> class concept ("" when no class is listed) ---------------------------------------------------
_DRUG_CLASSES: dict[str, str] = {
    "anticoagulant": "heparin enoxaparin lovenox dalteparin fondaparinux warfarin coumadin apixaban eliquis "
                     "rivaroxaban xarelto dabigatran pradaxa edoxaban argatroban bivalirudin",
    "antiplatelet": "aspirin asa clopidogrel plavix ticagrelor brilinta prasugrel cilostazol dipyridamole",
    "thrombolytic": "alteplase tpa tenecteplase",
    "antibiotic": "vancomycin zosyn piperacillin tazobactam ceftriaxone cefepime cefazolin cephalexin ampicillin "
                  "amoxicillin augmentin penicillin nafcillin oxacillin meropenem ertapenem imipenem azithromycin "
                  "clarithromycin erythromycin doxycycline minocycline ciprofloxacin levofloxacin moxifloxacin "
                  "metronidazole flagyl clindamycin linezolid daptomycin gentamicin tobramycin amikacin bactrim "
                  "trimethoprim sulfamethoxazole nitrofurantoin rifampin rifaximin fidaxomicin cefuroxime "
                  "cefpodoxime ceftazidime aztreonam tigecycline",
    "antiviral": "acyclovir valacyclovir ganciclovir valganciclovir oseltamivir tamiflu remdesivir tenofovir "
                 "entecavir sofosbuvir",
    "antifungal": "fluconazole voriconazole posaconazole micafungin caspofungin amphotericin nystatin",
    "steroid": "prednisone prednisolone methylprednisolone solumedrol dexamethasone hydrocortisone "
               "fludrocortisone budesonide",
    "diuretic": "furosemide lasix bumetanide torsemide hydrochlorothiazide hctz chlorthalidone spironolactone "
                "eplerenone metolazone acetazolamide",
    "antihypertensive": "lisinopril enalapril ramipril captopril losartan valsartan irbesartan candesartan "
                        "amlodipine nifedipine diltiazem verapamil hydralazine clonidine labetalol",
    "beta_blocker": "metoprolol carvedilol atenolol propranolol bisoprolol nadolol esmolol",
    "statin": "atorvastatin simvastatin rosuvastatin pravastatin lovastatin",
    "diabetes_drug": "insulin glargine lispro aspart metformin glipizide glyburide sitagliptin empagliflozin "
                     "dapagliflozin canagliflozin liraglutide semaglutide dulaglutide pioglitazone",
    "opioid": "morphine oxycodone hydromorphone dilaudid fentanyl hydrocodone tramadol methadone buprenorphine "
              "codeine",
    "analgesic": "acetaminophen tylenol paracetamol ibuprofen naproxen ketorolac celecoxib gabapentin pregabalin "
                 "lidocaine",
    "antiepileptic": "levetiracetam keppra phenytoin fosphenytoin valproate valproic lamotrigine carbamazepine "
                     "oxcarbazepine lacosamide topiramate phenobarbital",
    "psychiatric_drug": "sertraline fluoxetine citalopram escitalopram paroxetine venlafaxine duloxetine "
                        "bupropion mirtazapine trazodone quetiapine olanzapine risperidone haloperidol aripiprazole "
                        "clozapine lithium lorazepam diazepam clonazepam alprazolam midazolam chlordiazepoxide",
    "antiarrhythmic": "amiodarone digoxin sotalol flecainide dofetilide adenosine",
    "acid_suppressant": "pantoprazole omeprazole esomeprazole lansoprazole famotidine ranitidine sucralfate",
    "immunosuppressant": "tacrolimus cyclosporine mycophenolate azathioprine sirolimus methotrexate "
                         "hydroxychloroquine tocilizumab infliximab adalimumab rituximab belatacept",
    "chemotherapy": "cisplatin carboplatin oxaliplatin paclitaxel docetaxel doxorubicin cyclophosphamide "
                    "gemcitabine fluorouracil capecitabine pembrolizumab nivolumab bevacizumab trastuzumab",
    "bronchodilator": "albuterol ipratropium tiotropium salmeterol formoterol fluticasone",
    "vasopressor": "norepinephrine levophed epinephrine vasopressin phenylephrine dopamine dobutamine milrinone",
    "electrolyte": "potassium magnesium calcium phosphate bicarbonate",
    "laxative": "lactulose senna docusate polyethylene miralax bisacodyl",
    "antiemetic": "ondansetron zofran metoclopramide prochlorperazine",
    "thyroid_drug": "levothyroxine synthroid methimazole propylthiouracil",
    "other_drug": "tamsulosin finasteride allopurinol colchicine febuxostat naloxone narcan flumazenil "
                  "octreotide terlipressin ursodiol cholestyramine nitroglycerin oxytocin misoprostol "
                  "magnesium sulfate pseudoephedrine diphenhydramine benadryl cetirizine loratadine "
                  "montelukast sumatriptan donepezil memantine levodopa carbidopa baclofen tizanidine "
                  "cyclobenzaprine iron ferrous folate thiamine cyanocobalamin potassium chloride "
                  "emicizumab hydroxyurea deferasirox epoetin filgrastim alendronate denosumab zoledronic "
                  "sodium polystyrene patiromer kayexalate desmopressin gastrografin",
}
DRUG_CLASS: dict[str, str] = {name: cls for cls, names in _DRUG_CLASSES.items() for name in names.split()}
# class suffixes: an unlisted drug of a known class is still a drug
_DRUG_SUFFIXES: dict[str, str] = {
    "olol": "beta_blocker", "pril": "antihypertensive", "sartan": "antihypertensive", "dipine": "antihypertensive",
    "statin": "statin", "parin": "anticoagulant", "xaban": "anticoagulant", "gatran": "anticoagulant",
    "cillin": "antibiotic", "mycin": "antibiotic", "micin": "antibiotic", "floxacin": "antibiotic",
    "cycline": "antibiotic", "penem": "antibiotic", "conazole": "antifungal", "fungin": "antifungal",
    "prazole": "acid_suppressant", "tidine": "acid_suppressant", "ciclovir": "antiviral", "clovir": "antiviral",
    "mivir": "antiviral", "gliflozin": "diabetes_drug", "glutide": "diabetes_drug", "gliptin": "diabetes_drug",
    "sone": "steroid", "solone": "steroid", "mab": "immunosuppressant", "tinib": "chemotherapy",
    "platin": "chemotherapy", "taxel": "chemotherapy", "rubicin": "chemotherapy", "azepam": "psychiatric_drug",
    "zolam": "psychiatric_drug", "oxetine": "psychiatric_drug", "triptan": "other_drug", "tropium": "bronchodilator",
    "terol": "bronchodilator", "setron": "antiemetic", "dronate": "other_drug", "semide": "diuretic",
    "thiazide": "diuretic", "afil": "other_drug", "profen": "analgesic", "codone": "opioid", "morphone": "opioid",
}
_NOT_DRUGS = frozenset({"person", "reason", "season", "lesson", "poison", "tendon", "prison", "comparison",
                        "stone", "tone", "bone", "phone", "alone", "none", "someone", "done", "gone", "ozone",
                        "cortisone", "hormone", "postpone", "undergone", "milestone", "cornerstone", "mycin"})

# --- tests, procedures and findings: lay and clinical words -> one concept each ---------------------------------
_CONCEPT_WORDS: dict[str, str] = {
    # organs and systems
    "kidney": "kidney kidneys renal creatinine creat cr egfr gfr bun urea ureaN nephrology nephrologist aki ckd "
              "nephropathy nephritis dialysis hemodialysis",
    "heart": "heart cardiac cardio cardiology cardiologist coronary myocardial cardiomyopathy ventricular "
             "ventricle atrial atrium lvef ef echo echocardiogram tte tee",
    "heart_attack": "infarction mi nstemi stemi troponin trop",
    "lung": "lung lungs pulmonary respiratory pneumonia pneumonitis breathing breath breathe copd asthma "
            "bronchospasm",
    "liver": "liver hepatic hepatitis cirrhosis ast alt bilirubin tbili alk hepatology",
    "brain": "brain cerebral neuro neurologic neurological neurology intracranial",
    "stomach": "stomach gastric abdominal abdomen belly gi gastrointestinal bowel bowels intestine intestinal",
    "bladder": "bladder urinary urine pee peeing void voided voiding urination foley catheter",
    "blood_sugar": "sugar sugars glucose glycemic hyperglycemia hypoglycemia a1c hba1c diabetes diabetic",
    "blood_pressure": "bp hypertension hypotension hypertensive hypotensive",
    "blood_count": "hemoglobin hgb hb hct hematocrit anemia anaemia transfusion transfused prbc prbcs",
    "platelets": "platelet platelets plt thrombocytopenia",
    "white_cells": "wbc leukocytosis neutrophils neutropenia",
    "clot": "clot clots clotting thrombus thrombosis thrombotic embolism embolus emboli dvt thrombectomy",
    "bleeding": "bleed bleeding bled hemorrhage haemorrhage hemorrhagic rebleed",
    "stroke": "stroke cva infarct ischemic tia",
    "infection": "infection infected infections sepsis septic bacteremia abscess cellulitis osteomyelitis "
                 "culture cultures germ germs bacteria bacterial",
    "blockage": "occlusion occluded blockage blockages blocked obstruction obstructed stenosis narrowing narrowed",
    "coagulation": "inr ptt coagulation coagulopathy",
    "adhesions": "adhesion adhesions",
    "diverticula": "diverticulosis diverticulitis diverticulum diverticula diverticular pouch pouches",
    "feeding_tube": "ngt nasogastric",
    "sedative": "zolpidem ambien sedative sedating hypnotic",
    "seizure": "seizure seizures convulsion convulsions epilepsy epileptic eeg",
    "swelling": "swelling swollen edema oedema",
    "fracture": "fracture fractures fractured",
    "cancer": "cancer malignancy malignant tumor tumour carcinoma metastasis metastases metastatic oncology "
              "lymphoma leukemia",
    "pregnancy": "pregnancy pregnant gestation gestational obstetric fetal fetus baby labor labour delivery",
    "thyroid": "thyroid tsh t4 hypothyroidism hyperthyroidism",
    "potassium": "potassium k hyperkalemia hypokalemia",
    "sodium": "sodium na hyponatremia hypernatremia",
    "oxygen": "oxygen o2 spo2 saturation hypoxia hypoxemia",
    "fever": "fever febrile temperature",
    "pain": "pain painful ache aches",
    "heart_rhythm": "rhythm arrhythmia afib fibrillation flutter tachycardia bradycardia palpitations heartbeat",
    "inflammation": "inflammation inflammatory esr crp",
    # tests and procedures
    "imaging": "ct cta mri mra scan scans imaging xray x-ray cxr radiograph ultrasound doppler film films",
    "ecg": "ecg ekg electrocardiogram telemetry",
    "catheterization": "catheterization cath angiogram angiography angioplasty pci stent stents stenting",
    "bypass": "bypass cabg graft grafting revascularization revascularize",
    "endoscopy": "endoscopy egd colonoscopy scope endoscopic",
    "biopsy": "biopsy biopsies pathology",
    "surgery": "surgery surgical operation operative resection laparoscopic laparotomy repair",
    "intubation": "intubation intubated extubated extubation ventilator ventilation ventilated",
    "iv_fluids": "fluids fluid hydration",
    "radiation": "radiation radiotherapy",
    "chemotherapy_treatment": "chemo chemotherapy",
    "blood_thinner": "thinner thinners anticoagulation anticoagulated anticoagulant",
}
# multi-word lay phrases (matched before single words)
_PHRASES: dict[str, str] = {
    "blood thinner": "anticoagulant", "blood thinners": "anticoagulant", "water pill": "diuretic",
    "water pills": "diuretic", "heart attack": "heart_attack", "blood sugar": "blood_sugar",
    "blood pressure": "blood_pressure", "blood count": "blood_count", "red blood cells": "blood_count",
    "breathing tube": "intubation", "breathing machine": "intubation", "blood clot": "clot",
    "heart rate": "heart_rhythm", "heart rhythm": "heart_rhythm", "irregular heartbeat": "heart_rhythm",
    "pain medicine": "analgesic", "pain medication": "analgesic", "pain killer": "analgesic",
    "sugar pill": "diabetes_drug", "kidney function": "kidney", "liver tests": "liver", "white count": "white_cells",
    "x ray": "imaging", "cat scan": "imaging", "heart tracing": "ecg", "heart scan": "heart",
    "heart ultrasound": "heart", "dye test": "catheterization", "water tablet": "diuretic",
    "steroid": "steroid", "steroids": "steroid", "antibiotic": "antibiotic", "antibiotics": "antibiotic",
    "insulin": "diabetes_drug", "opioids": "opioid", "painkillers": "analgesic",
    "clot dissolving": "thrombolytic", "clot busting": "thrombolytic", "clot buster": "thrombolytic",
    "clotting test": "coagulation", "scar tissue": "adhesions", "nose tube": "feeding_tube",
    "stomach tube": "feeding_tube", "sleeping pill": "sedative", "sleeping pills": "sedative",
    "liver test": "liver", "kidney test": "kidney", "blood test": "blood_test", "blood tests": "blood_test",
}
_WORD_CONCEPT: dict[str, str] = {w.lower(): c for c, words in _CONCEPT_WORDS.items() for w in words.split()}
# the drug class concepts that mean the same thing as a lay concept
_CLASS_ALIASES = {"anticoagulant": "blood_thinner", "diuretic": "kidney_drug"}

TESTS = frozenset(
    "creatinine creat bun urea egfr hemoglobin hgb hct hematocrit platelets plt wbc inr ptt pt troponin trop bnp "
    "ntprobnp lactate lipase amylase ast alt bilirubin albumin ferritin tsh a1c hba1c glucose potassium sodium "
    "chloride bicarbonate hco3 magnesium phosphate calcium esr crp procalcitonin psa cea ldh ck d-dimer ddimer "
    "fibrinogen ammonia abg vbg ph pco2 po2 lvef ef spo2 urinalysis ua culture cultures".split())
_PROCEDURE_SUFFIXES = ("ectomy", "otomy", "ostomy", "plasty", "scopy", "graphy", "gram", "centesis", "pexy")

_WORD = re.compile(r"[a-z][a-z0-9'-]*")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@lru_cache(maxsize=50_000)
def drug_class(word: str) -> str | None:
    """The class concept of a drug name ("apixaban" -> anticoagulant), "" for a listed drug of no class, None for a
    word that is not a drug."""
    word = word.lower().strip("-'")
    if word in DRUG_CLASS:
        return DRUG_CLASS[word]
    if len(word) < 7 or word in _NOT_DRUGS:
        return None
    for suffix, cls in _DRUG_SUFFIXES.items():
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            return cls
    return None


@lru_cache(maxsize=50_000)
def concepts(text: str) -> frozenset[str]:
    """Canonical concepts a text mentions: drugs (by name and by class), tests, procedures, organs, findings, with
    lay phrases expanded ("blood thinner" -> anticoagulant, blood_thinner)."""
    lowered = " " + re.sub(r"[^a-z0-9]+", " ", text.lower()) + " "
    found: set[str] = set()
    for phrase, concept in _PHRASES.items():
        if f" {phrase} " in lowered:
            found.add(concept)
    tokens = [part for w in words(text) for part in {w.strip("-'"), *w.split("-")} if part and part[0].isalpha()]
    for word in tokens:  # "Creat-3.4*" is creat; "x-ray" both x-ray and ray
        if word in _WORD_CONCEPT:
            found.add(_WORD_CONCEPT[word])
        cls = drug_class(word)
        if cls is not None:
            found.add(f"drug:{word}")
            if cls:
                found.add(cls)
        if word in TESTS:
            found.add(f"test:{word}")
        if len(word) > 7 and word.endswith(_PROCEDURE_SUFFIXES):
            found.add(f"procedure:{word[:6]}")
    for cls, alias in _CLASS_ALIASES.items():
        if cls in found:
            found.add(alias)
        if alias in found:
            found.add(cls)
    return frozenset(found)
