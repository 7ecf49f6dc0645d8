"""FOCUS ServiceCategory and ServiceSubcategory for a service name, where the bill has none.

FOCUS 1.2 allows these categories and, under each, these subcategories (its own table, as
the FinOps Foundation's validator model 1.2.0.1 encodes it). A line that carries a valid
pair keeps it; one that carries a category of another vocabulary (Azure's ServiceFamily
`AI + Machine Learning`) or none at all gets the pair of the first rule below whose pattern
matches its ServiceName (case-insensitive, searched anywhere in the name), else `Other` /
`Other (Other)`. The pair depends on the service name alone, so every line of one service
lands in one category (FOCUS: one ServiceCategory per ServiceName).
"""

from __future__ import annotations

import re

SUBCATEGORIES: dict[str, tuple[str, ...]] = {
    "AI and Machine Learning": ("AI Platforms", "Bots", "Generative AI", "Machine Learning",
                                "Natural Language Processing", "Other (AI and Machine Learning)"),
    "Analytics": ("Analytics Platforms", "Business Intelligence", "Data Processing", "Search", "Streaming Analytics",
                  "Other (Analytics)"),
    "Business Applications": ("Productivity and Collaboration", "Other (Business Applications)"),
    "Compute": ("Containers", "End User Computing", "Quantum Compute", "Serverless Compute", "Virtual Machines",
                "Other (Compute)"),
    "Databases": ("Caching", "Data Warehouses", "Ledger Databases", "NoSQL Databases", "Relational Databases",
                  "Time Series Databases", "Other (Databases)"),
    "Developer Tools": ("Developer Platforms", "Continuous Integration and Deployment", "Development Environments",
                        "Source Code Management", "Quality Assurance", "Other (Developer Tools)"),
    "Identity": ("Identity and Access Management", "Other (Identity)"),
    "Integration": ("API Management", "Messaging", "Workflow Orchestration", "Other (Integration)"),
    "Internet of Things": ("IoT Analytics", "IoT Platforms", "Other (Internet of Things)"),
    "Management and Governance": ("Architecture", "Compliance", "Cost Management", "Data Governance",
                                  "Disaster Recovery", "Endpoint Management", "Observability", "Support",
                                  "Other (Management and Governance)"),
    "Media": ("Content Creation", "Gaming", "Media Streaming", "Mixed Reality", "Other (Media)"),
    "Migration": ("Data Migration", "Resource Migration", "Other (Migration)"),
    "Mobile": ("Other (Mobile)",),
    "Multicloud": ("Multicloud Integration", "Other (Multicloud)"),
    "Networking": ("Application Networking", "Content Delivery", "Network Connectivity", "Network Infrastructure",
                   "Network Routing", "Network Security", "Other (Networking)"),
    "Security": ("Secret Management", "Security Posture Management", "Threat Detection and Response",
                 "Other (Security)"),
    "Storage": ("Backup Storage", "Block Storage", "File Storage", "Object Storage", "Storage Platforms",
                "Other (Storage)"),
    "Web": ("Application Platforms", "Other (Web)"),
    "Other": ("Other (Other)",),
}
FALLBACK = ("Other", "Other (Other)")

# Other vocabularies' category names (Azure ServiceFamily) that mean a FOCUS category.
CATEGORY_ALIASES = {
    "ai + machine learning": "AI and Machine Learning",
    "containers": "Compute",
    "mixed reality": "Media",
    "management + governance": "Management and Governance",
    "internet of things": "Internet of Things",
}

# (pattern over ServiceName, category, subcategory): first match wins, so specific names
# come before the general words they contain (`Elastic Container Service` before `Elastic`).
RULES: tuple[tuple[str, str, str], ...] = (
    (r"sagemaker|bedrock|vertex|machine learning|\bml\b|\bai\b|openai|cognitive|comprehend|rekognition"
     r"|textract|polly|transcribe|translate|gemini|automl|generative", "AI and Machine Learning", "Machine Learning"),
    (r"kubernetes|\beks\b|\baks\b|\bgke\b|\boke\b|container|fargate|\becr\b|\becs\b|openshift|cloud run",
     "Compute", "Containers"),
    (r"lambda|cloud functions|functions|serverless|app engine", "Compute", "Serverless Compute"),
    (r"workspaces|appstream|virtual desktop", "Compute", "End User Computing"),
    (r"braket|quantum", "Compute", "Quantum Compute"),
    (r"elastic compute cloud|\bec2\b|compute engine|virtual machine|^compute$|batch|lightsail|gpu|capacity block",
     "Compute", "Virtual Machines"),
    (r"elastic block store|\bebs\b|block[ _]storage|managed disks|persistent disk", "Storage", "Block Storage"),
    (r"elastic file system|\befs\b|\bfsx\b|filestore|file[ _]storage|azure files|netapp", "Storage", "File Storage"),
    (r"backup|glacier", "Storage", "Backup Storage"),
    (r"simple storage service|\bs3\b|cloud storage|object[ _]stor|blob", "Storage", "Object Storage"),
    (r"storage", "Storage", "Storage Platforms"),
    (r"redshift|bigquery|synapse|snowflake|data warehouse", "Databases", "Data Warehouses"),
    (r"elasticache|memorystore|redis|memcache|cache", "Databases", "Caching"),
    (r"dynamodb|cosmos|documentdb|firestore|bigtable|datastore|keyspaces|nosql|mongo", "Databases",
     "NoSQL Databases"),
    (r"timestream|time series", "Databases", "Time Series Databases"),
    (r"relational database|\brds\b|aurora|cloud sql|sql database|sql managed instance|mysql|postgres|mariadb"
     r"|spanner|autonomous|database", "Databases", "Relational Databases"),
    (r"opensearch|elasticsearch|cloudsearch|kendra|\bsearch\b", "Analytics", "Search"),
    (r"kinesis|event hubs|stream analytics|dataflow|\bmsk\b|kafka|streaming", "Analytics", "Streaming Analytics"),
    (r"quicksight|looker|power bi|business intelligence", "Analytics", "Business Intelligence"),
    (r"\bglue\b|\bemr\b|athena|dataproc|data factory|databricks|data fusion|data processing", "Analytics",
     "Data Processing"),
    (r"analytics|data ?lake", "Analytics", "Analytics Platforms"),
    (r"cloudfront|\bcdn\b|content delivery|front door", "Networking", "Content Delivery"),
    (r"route ?53|\bdns\b|traffic manager|global accelerator", "Networking", "Network Routing"),
    (r"\bwaf\b|firewall|shield|ddos|network security", "Networking", "Network Security"),
    (r"load balanc|api gateway|app mesh|application gateway", "Networking", "Application Networking"),
    (r"direct connect|vpn|expressroute|interconnect|transit gateway|bandwidth|data transfer|egress|nat gateway",
     "Networking", "Network Connectivity"),
    (r"virtual private cloud|\bvpc\b|virtual network|network|ip address|private ?link", "Networking",
     "Network Infrastructure"),
    (r"key management|\bkms\b|secrets? manager|key vault|\bvault\b|certificate", "Security", "Secret Management"),
    (r"guardduty|detective|sentinel|threat|advanced threat protection|macie|inspector", "Security",
     "Threat Detection and Response"),
    (r"security hub|security command center|defender|advanced data security|security center|config\b",
     "Security", "Security Posture Management"),
    (r"security", "Security", "Other (Security)"),
    (r"identity|\biam\b|cognito|directory|active directory|entra|single sign", "Identity",
     "Identity and Access Management"),
    (r"simple queue|\bsqs\b|simple notification|\bsns\b|eventbridge|pub/?sub|service bus|event grid|\bmq\b"
     r"|messag", "Integration", "Messaging"),
    (r"step functions|workflows?|logic apps|airflow|composer|orchestrat", "Integration", "Workflow Orchestration"),
    (r"api management|apigee", "Integration", "API Management"),
    (r"\biot\b|internet of things", "Internet of Things", "IoT Platforms"),
    (r"cloudwatch|cloudtrail|logging|monitor|stackdriver|log analytics|x-ray|observability|prometheus|grafana"
     r"|insights|\blogs?\b", "Management and Governance", "Observability"),
    (r"support", "Management and Governance", "Support"),
    (r"cost explorer|budgets|billing|cost management", "Management and Governance", "Cost Management"),
    (r"systems manager|cloudformation|organizations|control tower|service catalog|resource manager|automation",
     "Management and Governance", "Architecture"),
    (r"audit manager|artifact|compliance|policy", "Management and Governance", "Compliance"),
    (r"migration|database migration|\bdms\b|datasync|transfer family|snowball", "Migration", "Data Migration"),
    (r"codebuild|codepipeline|codedeploy|cloud build|devops|pipelines", "Developer Tools",
     "Continuous Integration and Deployment"),
    (r"codecommit|source repositor|artifact registry|codeartifact", "Developer Tools", "Source Code Management"),
    (r"cloudshell|cloud9|cloud shell|codespaces|development environment", "Developer Tools",
     "Development Environments"),
    (r"device farm|load testing", "Developer Tools", "Quality Assurance"),
    (r"elemental|media|transcod|ivs\b|video", "Media", "Media Streaming"),
    (r"amplify|elastic beanstalk|app service|web app|static web", "Web", "Application Platforms"),
    (r"workmail|chime|connect\b|ses\b|simple email|office|teams|productivity", "Business Applications",
     "Productivity and Collaboration"),
)
_COMPILED = tuple((re.compile(pattern, re.IGNORECASE), category, sub) for pattern, category, sub in RULES)


def category_of(service_name: str | None) -> tuple[str, str]:
    """(ServiceCategory, ServiceSubcategory) for a service name by RULES, else FALLBACK."""
    for pattern, category, subcategory in _COMPILED:
        if service_name and pattern.search(service_name):
            return category, subcategory
    return FALLBACK


def normalised_category(value: str | None) -> str | None:
    """A FOCUS category for `value` (itself, or its alias), or None when it names none."""
    if value is None:
        return None
    if value in SUBCATEGORIES:
        return value
    return CATEGORY_ALIASES.get(value.strip().lower())


def service_pair(service_name: str | None, category: str | None, subcategory: str | None) -> tuple[str, str]:
    """The (category, subcategory) a line exports: a valid given pair as it is; a valid given
    category with a subcategory from the rules when they agree, else its `Other (...)`; else
    the rules' pair for the service name."""
    given = normalised_category(category)
    if given and subcategory in SUBCATEGORIES[given]:
        return given, subcategory
    derived = category_of(service_name)
    if given is None:
        return derived
    return given, derived[1] if derived[0] == given else f"Other ({given})"
