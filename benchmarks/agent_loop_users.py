# ruff: noqa: E501  (the scripts are data: one chat message per line, however long)
"""Development users of the agent-loop benchmark (``agent_loop.py``): tune on these, in folds.

Each script is one user's sessions with a chatbot, in the format :func:`agent_loop.parse_user`
reads: ``# date`` opens a session; ``U [fact=value/kind]: text`` is a user message stating facts
(``/kind`` marks a new value and how the change was phrased); ``U?:`` a user question (stored, as
the middleware stores every turn); ``A:`` the assistant's reply; ``? fact: text`` a probe (never
stored) whose gold is the user's statement of the fact's current value. Hand-written.
"""

from __future__ import annotations

USERS: dict[str, str] = {
    "alice": """
# 2024-03-02
U [home=boston, job=nurse]: Hi! I'm Alice, I live in Boston and work as a nurse.
A: Nice to meet you, Alice! Nursing in Boston must keep you busy.
U: Yeah, night shifts are rough. Any tips for sleeping during the day?
A: Blackout curtains, a cool room and the same wind-down routine every morning help a lot.
U [pet=cat]: My cat Biscuit thinks 9am is playtime, so that doesn't help.
A: Ha, Biscuit sounds like a handful. Maybe tire her out with a play session before bed.
# 2024-03-19
U?: Where do I live again? I'm filling in a form and my brain is fried.
A: You told me you live in Boston.
U: Thanks. Can you suggest a good stew for a cold evening?
A: A beef and barley stew is hearty and easy; it also reheats well after a shift.
# 2024-05-04
U [home=seattle/moved]: I moved to Seattle last week.
A: Congratulations on the move to Seattle! How are you settling in?
U: Slowly. Boxes everywhere and it hasn't stopped raining.
A: That sounds like Seattle in spring. Unpack the kitchen first, it makes a place feel like home.
U?: Where do I live now?
A: You live in Seattle now, after your move from Boston.
U [job=nurse]: I'm still a nurse, I transferred to a hospital here.
A: Good that you could keep nursing through the move.
? home: Where do I live now?
? home: Which city am I based in?
? job: What is my job?
? pet: What's my cat called?
""",
    "bruno": """
# 2024-01-10
U [home=lyon, job=chef, partner=claire]: Salut! Bruno here. I'm a chef in Lyon and I live with my girlfriend Claire.
A: Bonjour Bruno! A chef in Lyon, that is a serious food town.
U: It is. I'm trying to plan a tasting menu for spring.
A: Spring menus shine with asparagus, peas and morels. Do you want a five-course outline?
U: Sure, give me something with lamb as the main.
A: Pea velouté, white asparagus, morel tart, lamb rack with herbs, then a rhubarb dessert.
# 2024-02-22
U [job=baker/switched]: Big change: I switched from the restaurant to running a small bakery.
A: A bakery of your own! That's a big step, Bruno.
U: Mornings start at 4 now but I love it.
A: Early but rewarding. What do you bake first every day?
U: Baguettes and croissants, always.
A: The classics. Customers must line up for them.
# 2024-04-01
U?: What do I do for a living? My nephew asked and I want to see how you'd describe it.
A: You run a small bakery now; before that you were a chef in a restaurant.
U [partner=claire]: Claire and I just got engaged!
A: Congratulations to you and Claire!
? job: What do I do for a living?
? job: What's my work these days?
? partner: Who is my partner?
? home: Which city do I live in?
""",
    "chen": """
# 2024-02-03
U [car=civic, commute=drive]: Hey. I drive a Honda Civic to work every day, about 40 minutes each way.
A: Forty minutes is a long commute. Do you listen to anything on the way?
U [hobby=podcasts]: Mostly history podcasts. I'm into the Roman ones lately.
A: There are great Roman history series. Want a few recommendations?
U: Yes please.
A: Try The History of Rome, then Fall of Rome, then Emperors of Rome.
# 2024-03-15
U?: What car do I have? Insurance is asking and I blanked on the model year, but the model at least.
A: You told me you drive a Honda Civic.
U: Right, thanks. It's a 2016.
A: A 2016 Civic, noted.
# 2024-05-20
U [car=model3/got]: Finally got my Tesla Model 3, traded in the Civic.
A: Exciting! How do you like driving electric?
U: It's so quiet. Charging at home overnight is easy.
A: Home charging makes EVs much more convenient.
U [commute=train/these-days]: These days I take the train to work though, the car is for weekends.
A: The train gives you back your podcast time without the driving.
? car: What car do I drive?
? commute: How do I get to work?
? hobby: What kind of podcasts do I like?
""",
    "dana": """
# 2024-01-05
U [name=dana, home=boston]: Please call me Dana. I live in Boston.
A: Hi Dana! What can I do for you today?
U [diet=vegetarian]: I'm vegetarian, so I'm looking for high-protein dinners.
A: Lentil curry, tofu stir-fry and black bean chili are all good high-protein options.
U?: Where do I live?
A: You live in Boston.
# 2024-02-14
U: I need a gift idea for my sister, she likes gardening.
A: A nice pair of pruning shears or a set of heirloom seeds would be thoughtful.
U: Seeds are a great idea.
A: Pick varieties that suit her climate and she'll enjoy them all summer.
# 2024-04-02
U [home=seattle/now]: I moved to Seattle now.
A: Oh, Seattle! That's quite a change from Boston.
U?: Where do I live now?
A: Based on what you just said, you live in Seattle now.
U: Any good vegetarian spots near Capitol Hill?
A: Capitol Hill has plenty; look for places with seasonal vegetable menus.
? home: Where do I live now?
? home: What city am I in these days?
? diet: Do I eat meat?
? name: What is my name?
""",
    "emeka": """
# 2024-03-01
U [job=accountant, employer=pwc]: Morning! I'm an accountant at PwC, tax season is eating me alive.
A: Good morning! Tax season is brutal, hang in there.
U [sport=football]: I play five-a-side football on Thursdays to stay sane.
A: A weekly game is a great release. What position do you play?
U: Usually in goal, nobody else wants to.
A: Goalkeepers are always in demand.
# 2024-04-20
U?: Where do I work again, for the conference badge?
A: You work at PwC as an accountant.
U: Cheers. Conference is in Lisbon, any food I shouldn't miss?
A: Pastéis de nata, grilled sardines and bifana sandwiches.
# 2024-07-08
U [employer=deloitte/since]: I've been working at Deloitte since June, still accounting but in audit.
A: A move to Deloitte, congratulations! How is audit compared to tax?
U: Less crunch, more travel.
A: That's a fair trade for many people.
U [sport=_/no-longer]: I'm no longer playing football, my knee gave out.
A: Sorry about your knee. Swimming might be a gentler way to stay active.
? employer: Where do I work?
? employer: Which firm employs me?
? sport: Do I still play football?
? job: What's my profession?
""",
    "fatima": """
# 2024-02-11
U [home=manchester, study=law]: Hiya, I'm Fatima. I'm studying law in Manchester, second year.
A: Hi Fatima! Second-year law is a big one. How's it going?
U: Contract law is killing me.
A: Case briefs and past papers help a lot with contract law.
U [allergy=none]: Can you suggest snacks for long library sessions? I can eat anything.
A: Nuts, fruit, hummus with crackers, and dark chocolate keep you going.
# 2024-03-30
U: We had a mock trial today and I was the defence.
A: How did it go?
U: We won! The judge was a real barrister.
A: Brilliant result, well done.
# 2024-05-12
U [allergy=nuts/turns-out]: Turns out I'm allergic to nuts, I had a reaction at a friend's place.
A: That sounds scary, I'm glad you're okay. Do carry your prescribed medication.
U?: What snacks can I have in the library then?
A: Since nuts are out, try fruit, rice cakes, hummus with veg sticks or seeds if they're safe for you.
? allergy: Am I allergic to anything?
? allergy: What food allergies do I have?
? study: What am I studying?
? home: Where do I study?
""",
    "gustav": """
# 2024-01-20
U [home=oslo, job=engineer, kids=two]: Hello, Gustav from Oslo. Software engineer, father of two.
A: Hello Gustav! How old are your kids?
U: Six and nine. Both obsessed with skiing.
A: Perfect place for that. Do you ski with them?
U [sport=skiing]: Every weekend in winter, cross-country mostly.
A: Cross-country is great exercise for the whole family.
# 2024-03-03
U: Can you help me write a birthday poem for my wife?
A: Of course. What does she love?
U: Gardening and old films.
A: Roses bloom where you have been, like a Hitchcock scene, forever green... want me to continue?
# 2024-06-16
U [job=manager/started]: I started as an engineering manager this month, no more coding for me.
A: Congratulations on the promotion, Gustav!
U: It's mostly meetings. I miss the code.
A: Many new managers feel that. Keeping a small side project helps.
U?: What's my job title again? I need to update my LinkedIn.
A: You're an engineering manager now.
? job: What's my job title?
? job: Am I still a software engineer?
? home: Where do I live?
? sport: What sport do my family and I do in winter?
""",
    "hana": """
# 2024-02-01
U [phone=pixel, lang=japanese]: Hi, I'm Hana. I use a Pixel phone and I'm learning Japanese for a trip.
A: Hi Hana! How long until your trip?
U: Four months. I know hiragana already.
A: Great start. Katakana next, then common kanji.
U?: What phone do I have? I want to know which Japanese keyboard to install.
A: You have a Pixel, so Gboard's Japanese layout works well.
# 2024-03-10
U: I keep mixing up ni and de.
A: Ni marks a destination or a point in time; de marks where an action happens.
U: That helps, thanks.
A: You're welcome, keep practising with examples.
# 2024-05-22
U [phone=iphone/replaced]: My Pixel died so I replaced it with an iPhone 15.
A: Sorry about the Pixel. The iPhone has a good Japanese keyboard too.
U [lang=japanese]: I'm still doing Japanese every day on the train.
A: Daily practice is the key, well done.
U?: What phone do I have?
A: You now have an iPhone 15.
? phone: What phone do I have?
? phone: Which smartphone do I use now?
? lang: Which language am I learning?
""",
    "ivan": """
# 2024-01-08
U [home=warsaw, pet=dog]: Hey, I'm Ivan, I live in Warsaw with my dog Rex.
A: Hi Ivan! What breed is Rex?
U: A German shepherd, very energetic.
A: Shepherds need lots of exercise and mental work.
U [gym=crossfit]: We run together before I go to CrossFit.
A: That's a solid routine for both of you.
# 2024-02-28
U?: What's my dog's name? Testing whether you remember.
A: Your dog is Rex, a German shepherd.
U: Good. Now suggest a cheap dinner.
A: Pierogi with a side salad, or a big pot of bean soup.
# 2024-04-17
U [gym=yoga/quit]: I quit CrossFit, I do yoga now, my back was complaining.
A: Yoga is great for your back. How do you like it?
U: Humbling. I can't touch my toes.
A: Flexibility comes with time, be patient.
U [home=krakow/we]: Also we moved to Krakow, Rex loves the park near the new flat.
A: Krakow is lovely, and a park nearby is perfect for Rex.
? gym: What kind of exercise do I do?
? home: Where do I live?
? home: Which city am I living in now?
? pet: What is my dog called?
""",
    "julia": """
# 2024-03-05
U [job=teacher, subject=maths]: Hi! I'm Julia, I teach maths at a secondary school.
A: Hi Julia! What year groups do you teach?
U: Mostly Year 9 and Year 11.
A: Year 11 with exams must be intense.
U [drink=coffee]: It is. I survive on black coffee.
A: Black coffee, the teacher's fuel.
# 2024-04-12
U: Can you give me a fun fractions starter?
A: Pizza fractions: share slices among groups and compare the sizes.
U: Love it.
A: Enjoy the lesson!
# 2024-06-01
U [drink=tea/switched]: I switched to green tea, coffee was wrecking my sleep.
A: Green tea is gentler, good call.
U: I miss the coffee smell though.
A: You could keep decaf for the ritual.
U?: What do I drink in the mornings these days?
A: Green tea, since you switched from coffee.
? drink: What do I drink in the morning?
? drink: Do I still drink coffee?
? subject: What subject do I teach?
""",
    "kofi": """
# 2024-02-07
U [home=accra, job=developer, employer=andela]: Hello, I'm Kofi, a developer at Andela, living in Accra.
A: Hello Kofi! What stack do you work with?
U [lang=python]: Mostly Python and Django.
A: A solid stack. Any project you're excited about?
U: A payments dashboard.
A: Payments dashboards get interesting quickly, especially reconciliation.
# 2024-03-21
U: How do I make a Django query faster?
A: Use select_related and prefetch_related, add indexes, and check the query count.
U: select_related fixed it, thanks.
A: Glad it worked.
# 2024-05-30
U [employer=flutterwave/left]: I left Andela, I'm at Flutterwave now.
A: Congrats on the new role at Flutterwave!
U [lang=go/these-days]: These days I write mostly Go.
A: Go is great for payment services.
U?: Where do I work these days?
A: At Flutterwave, after leaving Andela.
? employer: Where do I work?
? lang: Which programming language do I mostly use?
? home: Which city do I live in?
""",
    "lena": """
# 2024-01-14
U [home=berlin, partner=single]: Hi, Lena here, 29, living alone in Berlin. Single and happy about it.
A: Hi Lena! Berlin is a fun city to be single in.
U [hobby=climbing]: I boulder three times a week.
A: That's dedicated! Which gym?
U: The one in Kreuzberg.
A: Nice, lots of good climbers there.
# 2024-03-02
U: Recommend a book for a rainy weekend?
A: The Remains of the Day, or for something lighter, The Thursday Murder Club.
U: Thursday Murder Club it is.
A: Enjoy!
# 2024-05-18
U [partner=jonas/implicit]: Jonas, my boyfriend, says hi, he's reading over my shoulder.
A: Hi Jonas! Nice to meet you.
U [home=berlin]: We're looking for a bigger flat in Berlin together.
A: Flat hunting in Berlin is tough, good luck!
U?: Am I single?
A: From what you said, you're with Jonas now.
? partner: Do I have a partner?
? partner: Who is my boyfriend?
? hobby: What sport do I do?
? home: Where do I live?
""",
    "marco": """
# 2024-02-02
U [home=milan, car=fiat]: Ciao! Marco from Milan. I drive an old Fiat Panda.
A: Ciao Marco! The Panda is a legend.
U [job=architect]: I'm an architect, mostly housing projects.
A: Housing projects are meaningful work.
U: Lots of paperwork though.
A: Architecture always has more paperwork than drawings.
# 2024-03-18
U?: What car do I drive?
A: An old Fiat Panda.
U: Yes, it's making a strange noise now.
A: A rattling noise is often the exhaust heat shield; have a mechanic check it.
# 2024-05-09
U [car=_/no-longer]: I don't have a car anymore, sold the Panda and I cycle everywhere.
A: Cycling in Milan is a great way to get around.
U [commute=bike]: My bike commute is 20 minutes.
A: That's a pleasant ride.
U?: What car do I drive?
A: You don't have a car anymore; you cycle.
? car: What car do I drive?
? car: Do I own a car?
? job: What's my job?
""",
    "nadia": """
# 2024-01-25
U [diet=vegan, home=toronto]: Hey! I'm Nadia in Toronto. Vegan for five years now.
A: Hey Nadia! Five years vegan, impressive.
U: Looking for a good vegan cheesecake recipe.
A: A cashew base with lemon and a date crust works beautifully.
U [pet=rabbit]: My rabbit Clover keeps trying to eat the dates.
A: Clover has good taste, but dates are too sugary for rabbits.
# 2024-03-12
U: What are some easy iron sources?
A: Lentils, chickpeas, spinach and fortified cereals, with vitamin C to absorb it.
U: Perfect.
A: Glad to help.
# 2024-05-27
U [diet=pescatarian/started]: I started eating fish again, so I'm pescatarian now, doctor's advice.
A: Understood. Salmon and sardines are great for omega-3.
U?: What's my diet?
A: You're pescatarian now.
? diet: What diet do I follow?
? diet: Am I vegan?
? pet: What pet do I have?
? home: Where do I live?
""",
    "oliver": """
# 2024-02-09
U [home=london, job=barista, band=guitar]: Oliver. London. Barista by day, guitarist in a band by night.
A: Hi Oliver! What kind of music does your band play?
U: Indie rock, lots of reverb.
A: Nice. Have you played any gigs?
U: A few pubs in Camden.
A: Camden is a great place to start.
# 2024-04-04
U?: What do I do for work?
A: You're a barista.
U: Yeah, not for much longer hopefully.
A: Are you planning a change?
# 2024-06-11
U [job=sound-engineer/big-news]: Big news: I got hired as a sound engineer at a studio!
A: That's amazing, Oliver! Congratulations.
U: My first session is Monday.
A: You'll do great.
U?: What do I do for work?
A: You're a sound engineer at a studio now.
? job: What do I do for work?
? job: Where am I working as of now?
? band: What instrument do I play?
? home: What city do I live in?
""",
    "priya": """
# 2024-01-17
U [home=pune, job=data-scientist, employer=infosys]: Hi, Priya here. Data scientist at Infosys in Pune.
A: Hi Priya! What kind of models do you build?
U: Churn prediction mostly.
A: Churn models are very useful for businesses.
U [hobby=dance]: I also teach Bharatanatyam on weekends.
A: That's beautiful, how long have you danced?
# 2024-03-08
U: Explain gradient boosting simply.
A: It builds many small trees, each fixing the errors of the ones before.
U: Nice.
A: Happy to help.
# 2024-06-02
U [home=bangalore/implicit, employer=swiggy/now]: My new flat in Bangalore is tiny but close to the Swiggy office where I work now.
A: Congratulations on the new job and the move!
U?: Where do I live?
A: In Bangalore now.
? home: Where do I live?
? employer: Which company do I work for?
? job: What is my job?
? hobby: What do I teach on weekends?
""",
    "quinn": """
# 2024-02-14
U [home=denver, job=paramedic]: Quinn here, they/them. Paramedic in Denver.
A: Hi Quinn! Paramedic work is intense.
U [hobby=hiking]: I hike fourteeners to decompress.
A: Colorado is perfect for that. How many have you done?
U: Twelve so far.
A: Impressive!
# 2024-04-01
U?: Where do I live?
A: In Denver.
U: Good. What's a quick dinner after a 12-hour shift?
A: Eggs and toast, or a frozen stir-fry with extra veg.
# 2024-06-20
U [job=firefighter/switched]: I switched careers, I'm a firefighter now.
A: Congratulations, Quinn! That's a big switch.
U [hobby=hiking]: Still hiking every weekend I'm off.
A: Good to keep that going.
? job: What do I do for work?
? job: What is my current career?
? home: Where do I live?
? hobby: What do I do to decompress?
""",
    "rosa": """
# 2024-01-09
U [home=madrid, kids=none, job=journalist]: Hola! Rosa, journalist in Madrid, no kids yet.
A: Hola Rosa! What do you cover?
U: Politics, mostly the national parliament.
A: Busy beat these days.
U: Always.
A: I can imagine.
# 2024-03-15
U: Help me with a catchy headline on housing prices.
A: "Priced Out: Madrid's Rent Squeeze Hits the Middle Class".
U: Not bad.
A: Happy to try more angles.
# 2024-06-07
U [kids=baby/we]: We had a baby girl, Lucía, two weeks ago!
A: Congratulations Rosa! Welcome, Lucía.
U [job=journalist]: I'm on leave from the paper for now.
A: Enjoy the time with her.
U?: Do I have kids?
A: Yes, a baby girl called Lucía.
? kids: Do I have any children?
? kids: What's my daughter's name?
? job: What do I do for a living?
""",
    "sam": """
# 2024-02-18
U [home=austin, job=teacher, pet=none]: Sam here. Teacher in Austin, no pets, allergic to cats.
A: Hi Sam! What do you teach?
U: Fourth grade.
A: Fourth graders are fun.
U: Mostly.
A: Ha!
# 2024-04-05
U?: Do I have any pets?
A: You told me you have no pets.
U: Right. Thinking about a dog though.
A: Dogs are a big commitment but worth it.
# 2024-06-30
U [pet=dog/got]: We adopted a beagle called Pickles!
A: Pickles! What a great name.
U: He howls at the mailman.
A: Beagles are famous for that.
U?: Do I have any pets?
A: Yes, a beagle called Pickles.
? pet: Do I have any pets?
? pet: What's my dog's name?
? home: Where do I live?
? job: What grade do I teach?
""",
    "tomas": """
# 2024-01-12
U [home=prague, job=student, study=physics]: Ahoj, Tomas. Physics student in Prague.
A: Ahoj Tomas! What area of physics?
U: Condensed matter.
A: Interesting field.
U [sport=running]: I run marathons as well.
A: Great endurance!
# 2024-03-04
U: Explain superconductivity in one sentence.
A: Below a critical temperature some materials carry current with zero resistance.
U?: Which city do I live in? Checking you remember me.
A: You live in Prague.
# 2024-06-14
U [job=phd/now, home=vienna/moved]: I'm a PhD student in Vienna now, moved after graduating.
A: Congratulations! Vienna is lovely.
U [sport=running]: Still running along the Danube.
A: What a place to run.
? job: Am I a student or working?
? home: Where do I live?
? home: What city am I in?
? sport: What sport do I do?
""",
    "uma": """
# 2024-02-05
U [home=chennai, instrument=veena, job=doctor]: Hi, Uma. Doctor in Chennai, I play the veena to relax.
A: Hi Uma! Veena is a beautiful instrument.
U: Thank you, I've played since childhood.
A: That's lovely.
U?: Can you recommend a ragam for evening practice?
A: Yaman Kalyani is a lovely evening ragam.
# 2024-04-10
U: Any quick healthy lunch for a hospital day?
A: Curd rice with vegetables, or sprouts salad.
U: Good idea.
A: Take care.
# 2024-06-25
U [instrument=violin/these-days]: These days I'm learning violin more than veena.
A: The violin is a wonderful addition.
U [home=chennai]: Still in Chennai, still at the hospital.
A: Good to hear.
? instrument: What instrument do I play?
? job: What is my job?
? home: Where do I live?
""",
    "victor": """
# 2024-01-30
U [home=paris, employer=airbus, car=peugeot]: Victor, Paris. Engineer at Airbus, I drive a Peugeot 208.
A: Bonjour Victor!
U: I work on wing design.
A: Fascinating.
U: It has its moments.
A: I'm sure.
# 2024-03-22
U?: What company do I work for?
A: Airbus.
U: Yes, for now.
A: Are you looking around?
# 2024-06-18
U [employer=safran/quit]: I quit Airbus, joined Safran in Toulouse.
A: A new chapter! Congratulations.
U [home=toulouse/implicit]: The commute from my new place in Toulouse is ten minutes.
A: That's very short.
U?: What company do I work for?
A: Safran, since you left Airbus.
? employer: What company do I work for?
? home: Which city do I live in?
? car: What car do I drive?
""",
    "wen": """
# 2024-02-20
U [home=shanghai, job=designer, partner=married]: Hi, Wen. Graphic designer in Shanghai, married.
A: Hi Wen!
U: I design packaging mostly.
A: Packaging design is fun.
U [hobby=painting]: I paint watercolours on weekends.
A: Lovely.
# 2024-04-09
U: Suggest a colour palette for a tea brand.
A: Jade green, warm cream and a touch of gold.
U: Perfect.
A: Enjoy!
# 2024-06-27
U [job=freelancer/quit]: I quit the agency and I'm freelancing now.
A: Freelancing gives you freedom.
U [hobby=pottery/switched]: And I swapped watercolours for pottery, I love the clay.
A: Pottery is very meditative.
U?: What's my hobby?
A: Pottery now.
? job: What do I do for work?
? hobby: What is my hobby?
? home: Where do I live?
""",
    "xavier": """
# 2024-01-03
U [home=montreal, job=nurse, lang=french]: Salut, Xavier. Nurse in Montreal, French is my first language.
A: Salut Xavier!
U: I work in emergency.
A: Intense work.
U: Always.
A: Take care of yourself.
# 2024-03-10
U?: Where do I live?
A: Montreal.
U: Yes. Recommend a winter coat brand?
A: Canada Goose or Arc'teryx for the deep cold.
# 2024-05-29
U [home=vancouver/relocated]: Relocated to Vancouver for my partner's job.
A: Vancouver has milder winters.
U [job=nurse]: Found a nursing job in emergency there too.
A: Great continuity.
U?: Where do I live?
A: Vancouver.
? home: Where do I live?
? home: What city do I live in now?
? job: What's my job?
? lang: What's my first language?
""",
    "yara": """
# 2024-02-12
U [home=cairo, study=medicine, pet=none]: Hi! Yara, med student in Cairo, no pets.
A: Hi Yara!
U: Anatomy exams next week.
A: Flashcards help.
U: Thanks.
A: Good luck!
# 2024-04-16
U: How do I remember the cranial nerves?
A: Use the mnemonic "Oh Oh Oh To Touch And Feel Very Good Velvet AH".
U: Ha, thanks.
A: You're welcome.
# 2024-06-21
U [pet=cat/got]: Got a kitten, named her Luna.
A: Luna is adorable.
U [study=medicine]: Studying is harder with a kitten on my notes.
A: Kittens are notorious for that.
U?: Do I have pets?
A: Yes, a kitten called Luna.
? pet: Do I have a pet?
? pet: What is my pet's name?
? study: What am I studying?
? home: Where do I live?
""",
}
