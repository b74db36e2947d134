# ruff: noqa: E501  (the scripts are data: one chat message per line, however long)
"""Held-out users of the agent-loop benchmark (``agent_loop.py``): reported, never tuned on.

Written separately from the development set, in another voice (longer, looser messages, other
topics and other ways of saying that something changed), in the same script format (see
``agent_loop_users.py``). Hand-written.
"""

from __future__ import annotations

USERS: dict[str, str] = {
    "beatrix": """
# 2023-09-04
U [home=glasgow, job=vet]: hello!! so I'm Beatrix, small animal vet, based up in Glasgow, and I need help writing a newsletter for the clinic
A: Hello Beatrix! Happy to help with the clinic newsletter. What should it cover this month?
U: autumn hazards for pets mostly, conkers, antifreeze, fireworks coming up
A: Good topics. I'd open with fireworks prep since owners need time to get ready.
U [pet=greyhound]: my own greyhound Mabel is terrified of fireworks so I feel that one personally
A: Poor Mabel. A den with blankets and some white noise can really help on the night.
# 2023-10-28
U: can you make the fireworks bit shorter, like 3 bullet points
A: Keep pets inside after dusk; build a quiet den; ask the vet early about calming options.
U?: btw which city did I say I'm in? want to add local bonfire dates
A: You said you're based in Glasgow.
# 2024-01-15
U [home=edinburgh/relocated]: ok update, the clinic group sent me to their Edinburgh branch and I've rented a place in Leith
A: A move to Edinburgh, that's a big change! How's Leith treating you?
U: windy. mabel hates the wind more than fireworks honestly
A: Greyhounds do feel the cold; a fleece coat could help her.
U?: which city am I in
A: You're in Edinburgh now, living in Leith.
? home: which city am I living in
? home: where's home for me at the moment
? job: what's my line of work
? pet: what breed is my dog
""",
    "cormac": """
# 2023-11-02
U [team=leinster, drink=guinness, job=plumber]: right so I'm a plumber, big Leinster rugby fan, and a pint of Guinness on a Friday is my religion. need a speech for my brother's 40th
A: Ha, sounds like a good Friday. Tell me a bit about your brother and I'll draft something.
U: he's a disaster at DIY, which is funny given I fix pipes for a living
A: Perfect material. Open with the time he tried to fix his own sink.
U: he flooded the kitchen actually
A: Even better. That's your opening line.
# 2023-12-20
U: what's a good gift for someone who has everything
A: An experience: a tasting tour, a match ticket, a cooking class.
U?: remind me who I support in rugby
A: You're a Leinster fan.
# 2024-02-11
U [drink=none/gave-up]: doing dry january turned into dry everything, I've given up the drink altogether
A: Fair play to you. How are you feeling?
U: sleeping better, saving a fortune
A: Two solid wins.
U [job=plumber]: still up to my elbows in other people's pipes though
A: Somebody has to do it!
? drink: do I drink alcohol
? drink: what's my usual friday drink
? team: which rugby team do I follow
? job: what do I do for work
""",
    "delphine": """
# 2023-08-14
U [instrument=cello, home=bordeaux]: bonjour! I play cello in a community orchestra here in Bordeaux. can you help me with practice schedules?
A: Bonjour Delphine! Sure. How much time can you practise each day?
U: maybe 45 minutes on weekdays
A: 10 minutes scales, 15 on the hardest passage, 20 on the full piece.
U [job=pharmacist]: I'm a pharmacist so evenings are the only time
A: Evenings work, just keep them consistent.
# 2023-10-02
U: we're doing Dvořák 8 this season
A: Lovely symphony; the cello opening in the first movement is gorgeous.
U?: what instrument do I play again? my friend doesn't believe you remember things
A: You play the cello in a community orchestra.
# 2024-01-20
U [instrument=double-bass/ended-up]: funny story, the orchestra was short of basses and I ended up moving over to the double bass. the cello's in its case now
A: What a change! How are you finding the bass?
U: my left hand hurts but the sound is wonderful
A: Shorter sessions for the first weeks will help your hand adapt.
? instrument: which instrument do I play in the orchestra
? instrument: do I still play cello
? job: what's my job
? home: where do I live
""",
    "eitan": """
# 2023-10-10
U [home=haifa, lang=hebrew, job=teacher]: Hi there, Eitan from Haifa. I teach high-school history and I'm trying to get my students interested in the Ottoman period
A: Hi Eitan! Primary sources work well; letters and travel diaries make it personal.
U: any specific travel diaries?
A: Evliya Çelebi's Book of Travels is vivid and full of anecdotes.
U [sport=swimming]: cool. separate thing: I swim laps every morning before school, any tips for shoulder pain?
A: Check your stroke; a wider hand entry and more body rotation often relieve the shoulder.
# 2023-12-04
U?: what subject do I teach
A: High-school history.
U: good. make me a quiz with 5 questions on the Ottoman millet system
A: Here are five: what was a millet; who led the Greek Orthodox millet; ...
# 2024-03-19
U [job=principal/took]: I took the principal job at our school, so no more classroom for me
A: Congratulations, Principal Eitan!
U [sport=swimming]: pool at 6am is my only quiet hour now
A: Protect that hour.
U?: what subject do I teach
A: You've moved from teaching history to being the principal.
? job: what is my job now
? job: do I still teach history
? sport: what exercise do I do in the mornings
? home: where do I live
""",
    "farida": """
# 2023-07-07
U [car=corolla, home=nairobi]: Hello. I drive a 2012 Corolla around Nairobi and the check engine light came on. Should I panic?
A: Not yet. It often means a loose fuel cap or a sensor. Get the code read at a garage.
U: it was the oxygen sensor
A: A common fix and not too expensive.
U [kids=twins]: good, I need the car for school runs, I have twins
A: Twins and school runs, you need a reliable car!
# 2023-09-30
U: what snacks can I pack for 7 year olds
A: Apple slices, yoghurt tubes, cheese cubes and mandazi if you bake.
U?: what car do I drive, I need the model for a parts order
A: A 2012 Toyota Corolla.
# 2024-02-08
U [car=rav4/finally]: finally said goodbye to the Corolla, we have a RAV4 now, much more room for the twins
A: Congratulations on the RAV4!
U: the boot fits both bikes
A: That's a big upgrade.
U?: what car do I drive
A: A RAV4 now.
? car: what car do I drive
? car: what's the model of our family car
? kids: how many children do I have
? home: which city do I live in
""",
    "gunnar": """
# 2023-06-12
U [diet=keto, job=carpenter]: hey. carpenter here, been doing keto for a while, looking for lunches that survive a day in a van
A: Hard-boiled eggs, cheese, salami, nuts and a thermos of soup travel well.
U: thermos soup is genius
A: A broth with sausage and cabbage fits keto too.
U [home=reykjavik]: it's cold in Reykjavik so soup works year round
A: Exactly.
# 2023-09-18
U: how do I sharpen a chisel properly
A: Flatten the back, hone the bevel at 25 to 30 degrees, then strop it.
U?: what diet am I on
A: You're doing keto.
# 2024-01-05
U [diet=mediterranean/nowadays]: nowadays I'm eating mediterranean style, keto got boring and my cholesterol went up
A: Mediterranean is great for cholesterol.
U: lots of fish and olive oil
A: A lovely way to eat.
? diet: what diet am I on
? diet: am I still doing keto
? job: what is my trade
? home: where do I live
""",
    "hiroko": """
# 2023-05-05
U [employer=sony, home=tokyo]: Good evening. I'm a product manager at Sony in Tokyo and I want to improve my English presentations.
A: Good evening! Let's practise. Tell me the topic of your next presentation.
U: a new headphone launch
A: Start with the problem the headphones solve, then one clear number.
U [hobby=tea]: I also practise tea ceremony on Sundays, it calms me before big weeks
A: That sounds very peaceful.
# 2023-08-21
U: please correct: "Our product make the user more happy."
A: "Our product makes users happier."
U?: which company do I work at
A: Sony.
# 2024-02-26
U [employer=nintendo/joined]: I joined Nintendo as of this month, my first week was exciting
A: Congratulations on joining Nintendo!
U [home=kyoto/implicit]: the office is in Kyoto so I am also getting used to a quieter city
A: Kyoto is beautiful.
? employer: where do I work
? employer: which company employs me at the moment
? home: which city do I live in
? hobby: what do I do on Sundays
""",
    "ines": """
# 2023-09-01
U [partner=pedro, home=porto]: olá! I live in Porto with my boyfriend Pedro, we're planning a trip to Morocco
A: Olá Ines! Morocco is wonderful. How long are you going for?
U: ten days in october
A: Marrakech, the Atlas mountains and a night in the desert would fit nicely.
U [job=nurse]: I'm a nurse so I need the vaccines list too
A: Check hepatitis A and typhoid with a travel clinic.
# 2023-11-15
U: the desert night was magical
A: I'm so glad you enjoyed it!
U?: who do I live with
A: With your boyfriend Pedro.
# 2024-03-03
U [partner=single/broke-up]: Pedro and I broke up, I'm living on my own now
A: I'm sorry, Ines. How are you holding up?
U: better than I expected. new routines
A: That's a good sign.
U?: who do I live with
A: You're living on your own now.
? partner: who do I live with
? partner: do I have a boyfriend
? home: what city do I live in
? job: what's my job
""",
    "jorge": """
# 2023-04-11
U [job=bank-teller, home=bogota]: buenas, I'm Jorge, I work as a bank teller in Bogotá and I want to move into software. where do I start?
A: Start with Python basics, then build small projects that solve problems you know from the bank.
U: like a queue simulator?
A: Exactly, a queue simulator is a great first project.
U [sport=cycling]: I'll code it on weekends after my long bike rides
A: Good balance.
# 2023-08-09
U: my simulator works!!
A: Brilliant, put it on GitHub.
U?: what do I do for a living
A: You're a bank teller learning to code.
# 2024-01-29
U [job=junior-dev/landed]: I landed a junior developer role at a fintech, starting Monday, no more counting cash
A: Jorge, that's fantastic news! You earned it.
U: nervous though
A: Everyone is, you'll be fine.
? job: what do I do for a living
? job: am I still a bank teller
? sport: what do I do on weekends for exercise
? home: where do I live
""",
    "kalani": """
# 2023-03-15
U [home=honolulu, hobby=surfing, job=lifeguard]: aloha, Kalani here, lifeguard in Honolulu, surf every dawn
A: Aloha Kalani! What a life.
U: haha it has its moments. sunburn is constant
A: Reef-safe sunscreen and a rash guard help.
U?: what's a good board for small waves
A: A longboard or a fish will catch small waves easily.
# 2023-07-19
U: I tried a fish, it's fun
A: Fish boards are a blast in mushy surf.
U?: what's my job again
A: You're a lifeguard.
# 2024-01-12
U [job=coach/currently, hobby=surfing]: currently coaching the junior surf team instead of guarding, best job ever
A: That sounds perfect for you.
U: the kids are fearless
A: That's the spirit of surfing.
? job: what's my job
? job: am I still a lifeguard
? hobby: what do I do every dawn
? home: where do I live
""",
    "lucia": """
# 2023-10-01
U [gym=pilates, home=buenos-aires]: hola, I'm Lucia from Buenos Aires, I do pilates three times a week
A: Hola Lucia! Pilates is great for core strength.
U [job=lawyer]: I need it, I sit at a desk all day as a lawyer
A: Pilates is a good counterbalance.
U: any stretches for the desk?
A: Chin tucks, seated spinal twists and hip flexor stretches every hour.
# 2023-12-12
U: recommend a podcast for the commute
A: Try "Radio Ambulante" if you like stories.
U?: what exercise do I do
A: Pilates, three times a week.
# 2024-04-08
U [gym=tango/swapped]: I dropped pilates and signed up for tango classes, it's exercise and fun
A: Tango! How wonderful in Buenos Aires.
U: my feet hurt
A: Good shoes and patience.
? gym: what exercise do I do
? gym: do I still do pilates
? job: what is my job
? home: where do I live
""",
    "mateusz": """
# 2023-02-02
U [home=gdansk, employer=shipyard, pet=parrot]: cześć. I'm Mateusz, welder at the Gdańsk shipyard, I have a grey parrot named Kuba who talks too much
A: Cześć Mateusz! What does Kuba say?
U: mostly my wife's name and the doorbell sound
A: Ha, parrots are great mimics.
U: it drives us crazy
A: I can imagine.
# 2023-06-06
U?: what's my parrot called
A: Kuba.
U: right. what should I feed him besides seeds
A: Fresh vegetables, some fruit and pellets.
# 2024-02-19
U [employer=wind-farm/work-for]: I work for an offshore wind farm company now, welding turbine foundations
A: That's a big change from the shipyard.
U [home=gdansk]: still living in Gdańsk, it's close to the port
A: Convenient.
? employer: who do I work for
? employer: do I still work at the shipyard
? pet: what's my parrot's name
? home: what city do I live in
""",
    "noor": """
# 2023-09-22
U [study=architecture, home=amman]: hi, I'm Noor, architecture student in Amman, working on my final project
A: Hi Noor! What's your project about?
U: a public library for a refugee camp
A: That's meaningful work.
U [drink=coffee]: lots of late nights and cardamom coffee
A: The fuel of architecture students.
# 2023-12-01
U: how do I make my renders look warmer
A: Lower the colour temperature, add soft light and some wood textures.
U?: what am I studying
A: Architecture.
# 2024-03-25
U [study=graduated/graduated, job=junior-architect]: I graduated!! and I got a junior architect job at a firm in Amman
A: Congratulations Noor, that's huge!
U [drink=coffee]: still drinking too much cardamom coffee
A: Some things never change.
U?: what am I studying
A: You've graduated, you're a junior architect now.
? study: am I a student
? job: what's my job
? home: where do I live
? drink: what do I drink late at night
""",
    "oskar": """
# 2023-05-18
U [partner=married, home=gothenburg, job=nurse]: hej. I'm Oskar, nurse in Gothenburg, married with no kids
A: Hej Oskar!
U: my wife and I want to start a vegetable garden
A: Start small: lettuce, radishes and potatoes do well in Sweden.
U: balcony only
A: Then herbs, cherry tomatoes and lettuce in pots.
# 2023-08-29
U: the tomatoes worked!
A: Great harvest!
U?: where do I live
A: In Gothenburg.
# 2024-02-13
U [home=malmo/we]: we've just relocated down to Malmö, a house with a real garden this time
A: A real garden! Congratulations.
U: potatoes here I come
A: Enjoy the space.
U?: where do I live
A: Malmö now.
? home: where do I live
? home: what town are we in
? job: what do I work as
""",
    "paloma": """
# 2023-07-01
U [phone=samsung, home=seville]: hola, Paloma, Seville. my Samsung keeps dying by lunchtime, help?
A: Check battery usage in settings, lower brightness and turn off always-on display.
U: the always-on was on
A: That'll help a lot.
U [job=tour-guide]: I'm a tour guide so I need it all day
A: Then a small power bank too.
# 2023-10-14
U: what's a good power bank
A: Anker's 10000 mAh is small and reliable.
U?: what phone do I use
A: A Samsung.
# 2024-03-02
U [phone=iphone/bought]: gave up on android and bought an iPhone 15, battery's way better
A: Glad it's better.
U [job=tour-guide]: lasts through a full day of tours
A: Perfect.
? phone: what phone do I use
? phone: do I still have the samsung
? job: what's my job
? home: where do I live
""",
    "ravi": """
# 2023-03-10
U [home=delhi, employer=tcs, diet=vegetarian]: namaste, I'm Ravi, working at TCS in Delhi, strict vegetarian
A: Namaste Ravi!
U: looking for protein ideas
A: Paneer, dal, chana and soya chunks.
U: soya chunks curry is my favourite
A: Great choice.
# 2023-07-22
U?: where do I work
A: TCS.
U: yes. interview prep questions for a senior role?
A: Prepare system design, leadership examples and a project deep-dive.
# 2024-01-18
U [employer=microsoft/ever-since]: ever since I joined Microsoft in November life has been hectic
A: Congratulations on Microsoft!
U [home=hyderabad/implicit]: the Hyderabad campus is huge, I've found a flat near it
A: Hyderabad is a good city.
U?: where do I work
A: Microsoft.
? employer: where do I work
? home: which city do I live in
? diet: do I eat meat
""",
}
